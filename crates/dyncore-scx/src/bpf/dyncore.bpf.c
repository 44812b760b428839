/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * dyncore's sched_ext scheduler, the kernel half: table-driven.
 *
 * The policy runs in user space (dyncore-scx). It writes, for every task of
 * the command, where it runs: a CPU and a slice, or nowhere (the `assign`
 * map); this half carries that out at every wake-up, slice end and kick,
 * and sends the kernel's callbacks up as events (the `events` ring buffer).
 *
 * Invariants:
 * 1. A task is moved into a CPU's local DSQ only by that CPU's dispatch,
 *    and only if its assignment names that CPU and it is not throttled;
 *    until then every runnable task waits in DYNC_HELD_DSQ.
 * 2. A running task whose assignment no longer names its CPU (or which is
 *    throttled) gets no slice refill and loses its slice at the next tick.
 * 3. Every callback a task of the command goes through is sent up, or
 *    counted in nr_dropped when the ring buffer is full.
 */
#include <scx/common.bpf.h>
#include "intf.h"

char _license[] SEC("license") = "GPL";

UEI_DEFINE(uei);

const volatile u64 default_slice_ns = 4000000;

volatile u64 nr_dropped, nr_held, nr_direct, nr_moved, nr_refills,
	     nr_tick_preempts, nr_bad_cpu, nr_throttles, nr_misplaced, nr_released;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 << 20);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, s32);
	__type(value, struct dync_assign);
} assign SEC(".maps");

/* The command task running on each CPU (0: none), from running/stopping. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, DYNC_MAX_CPUS);
	__type(key, u32);
	__type(value, s32);
} cpu_curr SEC(".maps");

/* Tasks moved into a CPU's local DSQ that have not started yet: pid -> cpu. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, s32);
	__type(value, s32);
} inflight SEC(".maps");

static void emit(u32 kind, const struct task_struct *p, s32 cpu, u64 arg)
{
	struct dync_event *e;
	/* Running and stopping are records, read at the next poll: no wake-up. */
	u64 flags = (kind == DYNC_EV_RUNNING || kind == DYNC_EV_STOPPING) ?
		BPF_RB_NO_WAKEUP : 0;

	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		__sync_fetch_and_add(&nr_dropped, 1);
		return;
	}
	e->kind = kind;
	e->pid = p->pid;
	e->tgid = p->tgid;
	e->cpu = cpu;
	e->ptgid = kind == DYNC_EV_ENABLE ? BPF_CORE_READ(p, real_parent, tgid) : 0;
	e->pad = 0;
	e->ts = bpf_ktime_get_ns();
	e->arg = arg;
	if (kind == DYNC_EV_ENABLE || kind == DYNC_EV_EXIT)
		bpf_probe_read_kernel_str(e->comm, sizeof(e->comm), p->comm);
	else
		e->comm[0] = 0;
	bpf_ringbuf_submit(e, flags);
}

static struct dync_assign *lookup(const struct task_struct *p)
{
	s32 pid = p->pid;

	return bpf_map_lookup_elem(&assign, &pid);
}

/* The CPU the policy runs @p on, or DYNC_NO_CPU. */
static s32 runnable_cpu(const struct task_struct *p, struct dync_assign *a)
{
	if (!a || a->cpu < 0 || a->throttled)
		return DYNC_NO_CPU;
	if (!bpf_cpumask_test_cpu(a->cpu, p->cpus_ptr)) {
		__sync_fetch_and_add(&nr_bad_cpu, 1);
		return DYNC_NO_CPU;
	}
	return a->cpu;
}

s32 BPF_STRUCT_OPS(dyncore_select_cpu, struct task_struct *p, s32 prev_cpu,
		   u64 wake_flags)
{
	s32 cpu = runnable_cpu(p, lookup(p));

	/* No direct dispatch here: enqueue decides, with the assignment. */
	return cpu >= 0 ? cpu : prev_cpu;
}

void BPF_STRUCT_OPS(dyncore_enqueue, struct task_struct *p, u64 enq_flags)
{
	s32 cpu = runnable_cpu(p, lookup(p)), pid = p->pid;

	bpf_map_delete_elem(&inflight, &pid);
	/*
	 * Every runnable task waits in the held DSQ; a CPU takes the task the
	 * policy put on it there when it dispatches (below). Never straight
	 * into a local DSQ: a task queued there would still run on that CPU
	 * after the policy had moved it elsewhere.
	 */
	scx_bpf_dsq_insert(p, DYNC_HELD_DSQ, default_slice_ns, enq_flags);
	if (cpu >= 0) {
		scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
		__sync_fetch_and_add(&nr_direct, 1);
	} else {
		__sync_fetch_and_add(&nr_held, 1);
	}
}

void BPF_STRUCT_OPS(dyncore_dispatch, s32 cpu, struct task_struct *prev)
{
	struct task_struct *p;
	struct dync_assign *a;

	/* A held task the policy has since put on this CPU. */
	bpf_for_each(scx_dsq, p, DYNC_HELD_DSQ, 0) {
		a = lookup(p);
		if (!a || runnable_cpu(p, a) != cpu)
			continue;
		s32 pid = p->pid;

		/*
		 * Publish it in flight, then read its assignment again: user
		 * space writes the assignment before it reads `inflight`, so
		 * either it sees this task on its way here, or this sees its new
		 * assignment and leaves the task held.
		 */
		bpf_map_update_elem(&inflight, &pid, &cpu, BPF_ANY);
		a = lookup(p);
		if (!a || runnable_cpu(p, a) != cpu) {
			bpf_map_delete_elem(&inflight, &pid);
			continue;
		}
		scx_bpf_dsq_move_set_slice(BPF_FOR_EACH_ITER, a->slice_ns);
		if (scx_bpf_dsq_move(BPF_FOR_EACH_ITER, p, SCX_DSQ_LOCAL_ON | cpu, 0)) {
			__sync_fetch_and_add(&nr_moved, 1);
			return;
		}
		bpf_map_delete_elem(&inflight, &pid);
	}

	/* The task that ran here still may: refill its slice. */
	if (prev && (prev->scx.flags & SCX_TASK_QUEUED)) {
		a = lookup(prev);
		if (!a || runnable_cpu(prev, a) != cpu)
			return;
		if (a->limited) {
			/* At a duty below 100%: one slice per tick period. */
			a->throttled = 1;
			__sync_fetch_and_add(&nr_throttles, 1);
			return;
		}
		scx_bpf_task_set_slice(prev, a->slice_ns);
		__sync_fetch_and_add(&nr_refills, 1);
	}
}

/*
 * A task that may not leave its CPU now (migration disabled, in the
 * kernel) is run where it is, by the kernel itself: kicking it off would
 * only bring it back, over and over. Left to run out of that section; the
 * record shows where it ran, and the checker judges it.
 */
static bool pinned_by_kernel(const struct task_struct *p)
{
	return p->migration_disabled || p->nr_cpus_allowed == 1;
}

void BPF_STRUCT_OPS(dyncore_tick, struct task_struct *p)
{
	if (pinned_by_kernel(p))
		return;
	if (runnable_cpu(p, lookup(p)) != scx_bpf_task_cpu(p)) {
		scx_bpf_task_set_slice(p, 0);
		__sync_fetch_and_add(&nr_tick_preempts, 1);
	}
}

void BPF_STRUCT_OPS(dyncore_runnable, struct task_struct *p, u64 enq_flags)
{
	emit(DYNC_EV_RUNNABLE, p, scx_bpf_task_cpu(p), enq_flags);
}

void BPF_STRUCT_OPS(dyncore_running, struct task_struct *p)
{
	s32 cpu = scx_bpf_task_cpu(p), pid = p->pid;
	u32 key = cpu;
	s32 *curr = bpf_map_lookup_elem(&cpu_curr, &key);

	/* Shown running (and no longer in flight) before the record's time. */
	if (curr)
		*curr = pid;
	bpf_map_delete_elem(&inflight, &pid);
	/*
	 * A task preempted with its migration disabled is put back in its
	 * CPU's local DSQ by the kernel itself (no ops.enqueue): it runs there
	 * whatever its assignment says. The record marks such runs.
	 */
	emit(DYNC_EV_RUNNING, p, cpu, p->migration_disabled ? DYNC_RUN_FORCED : 0);
	/* Moved elsewhere between its dispatch and now: off at once. */
	if (!pinned_by_kernel(p) && runnable_cpu(p, lookup(p)) != cpu) {
		scx_bpf_task_set_slice(p, 0);
		scx_bpf_kick_cpu(cpu, SCX_KICK_PREEMPT);
		/* Others queued here before the policy moved them: back through enqueue. */
		scx_bpf_reenqueue_local_from_anywhere();
		__sync_fetch_and_add(&nr_misplaced, 1);
	}
}

/*
 * A higher class (a fair task) takes the CPU: the tasks in its local DSQ go
 * back through enqueue, so that none waits there to run after the policy
 * has moved it elsewhere (invariant 1).
 */
void BPF_STRUCT_OPS(dyncore_cpu_release, s32 cpu, struct scx_cpu_release_args *args)
{
	scx_bpf_reenqueue_local();
	__sync_fetch_and_add(&nr_released, 1);
}

void BPF_STRUCT_OPS(dyncore_stopping, struct task_struct *p, bool runnable)
{
	s32 cpu = scx_bpf_task_cpu(p);
	u32 key = cpu;
	s32 *curr = bpf_map_lookup_elem(&cpu_curr, &key);

	/*
	 * The record's time first, then the CPU is shown empty: user space,
	 * which answers an Offline when it sees the CPU empty, must never see
	 * it so before the time the record gives the task's stop.
	 */
	emit(DYNC_EV_STOPPING, p, cpu, runnable);
	if (curr && *curr == p->pid)
		*curr = 0;
}

void BPF_STRUCT_OPS(dyncore_quiescent, struct task_struct *p, u64 deq_flags)
{
	s32 pid = p->pid;

	bpf_map_delete_elem(&inflight, &pid);
	emit(DYNC_EV_QUIESCENT, p, scx_bpf_task_cpu(p), deq_flags);
}

void BPF_STRUCT_OPS(dyncore_enable, struct task_struct *p)
{
	s32 cpu = scx_bpf_task_cpu(p);

	emit(DYNC_EV_ENABLE, p, cpu, 0);
	/*
	 * A task that joins while running (it set SCHED_EXT on itself) keeps
	 * its CPU until it is rescheduled: take its slice and kick it off, so
	 * that it runs only where the policy puts it (invariant 1).
	 */
	if (runnable_cpu(p, lookup(p)) != cpu) {
		scx_bpf_task_set_slice(p, 0);
		scx_bpf_kick_cpu(cpu, SCX_KICK_PREEMPT);
	}
}

void BPF_STRUCT_OPS(dyncore_exit_task, struct task_struct *p,
		    struct scx_exit_task_args *args)
{
	s32 pid = p->pid;

	emit(DYNC_EV_EXIT, p, scx_bpf_task_cpu(p), 0);
	bpf_map_delete_elem(&assign, &pid);
	bpf_map_delete_elem(&inflight, &pid);
}

s32 BPF_STRUCT_OPS_SLEEPABLE(dyncore_init)
{
	return scx_bpf_create_dsq(DYNC_HELD_DSQ, -1);
}

void BPF_STRUCT_OPS(dyncore_exit, struct scx_exit_info *ei)
{
	UEI_RECORD(uei, ei);
}

/* User space kicks the CPUs whose task it changed (SCX_KICK_PREEMPT). */
SEC("syscall")
int dync_kick(struct dync_kick_arg *arg)
{
	scx_bpf_kick_cpu(arg->cpu, arg->flags);
	return 0;
}

SCX_OPS_DEFINE(dyncore,
	       .select_cpu		= (void *)dyncore_select_cpu,
	       .enqueue			= (void *)dyncore_enqueue,
	       .dispatch		= (void *)dyncore_dispatch,
	       .tick			= (void *)dyncore_tick,
	       .cpu_release		= (void *)dyncore_cpu_release,
	       .runnable		= (void *)dyncore_runnable,
	       .running			= (void *)dyncore_running,
	       .stopping		= (void *)dyncore_stopping,
	       .quiescent		= (void *)dyncore_quiescent,
	       .enable			= (void *)dyncore_enable,
	       .exit_task		= (void *)dyncore_exit_task,
	       .init			= (void *)dyncore_init,
	       .exit			= (void *)dyncore_exit,
	       .name			= "dyncore");
