/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * What the BPF half and dyncore-scx's user-space half share: the events the
 * kernel's callbacks send up (a BPF ring buffer) and the placement the
 * policy sends down (a hash map, pid -> assignment).
 */
#ifndef __DYNCORE_INTF_H
#define __DYNCORE_INTF_H

#ifndef __VMLINUX_H__
typedef unsigned int u32;
typedef int s32;
typedef unsigned long long u64;
#endif

/* The most CPUs the scheduler tracks (the size of its per-CPU map). */
#define DYNC_MAX_CPUS 1024

/* The custom DSQ that holds every runnable task the policy runs nowhere. */
#define DYNC_HELD_DSQ 1

/* An assignment's cpu when the policy runs the task nowhere. */
#define DYNC_NO_CPU (-1)

/* The kernel callback an event comes from. */
enum dync_event_kind {
	DYNC_EV_ENABLE = 1,    /* ops.enable: the task joined sched_ext */
	DYNC_EV_EXIT = 2,      /* ops.exit_task: it exited (or left sched_ext) */
	DYNC_EV_RUNNABLE = 3,  /* ops.runnable: it became runnable (arg: enq flags) */
	DYNC_EV_RUNNING = 4,   /* ops.running: it started on cpu (arg: DYNC_RUN_*) */
	DYNC_EV_STOPPING = 5,  /* ops.stopping: it stopped on cpu (arg: still runnable) */
	DYNC_EV_QUIESCENT = 6, /* ops.quiescent: it is no longer runnable (sleeps) */
};

/*
 * A running event's arg: the task's migration was disabled when it started,
 * so the kernel, not this scheduler, kept it on that CPU.
 */
#define DYNC_RUN_FORCED 1

struct dync_event {
	u32 kind;
	s32 pid;
	s32 tgid;
	s32 cpu;
	s32 ptgid; /* the parent's tgid (enable only): which command a task is of */
	u32 pad;
	u64 ts;  /* bpf_ktime_get_ns(): CLOCK_MONOTONIC */
	u64 arg;
	char comm[16]; /* the task's name (enable and exit only) */
};

/* Where the policy runs a task: a CPU's local DSQ with a slice, or nowhere. */
struct dync_assign {
	s32 cpu;       /* DYNC_NO_CPU: held */
	u32 limited;   /* the CPU runs at a duty below 100%: no slice refills */
	u64 slice_ns;
	u32 throttled; /* used its slice this period: held until the next tick */
	u32 pad;
};

/* The argument of the dync_kick syscall program. */
struct dync_kick_arg {
	s32 cpu;
	u32 pad;
	u64 flags;
};

#endif /* __DYNCORE_INTF_H */
