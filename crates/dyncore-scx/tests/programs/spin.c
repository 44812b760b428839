/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * spin THREADS SECONDS [churn]: THREADS compute threads that spin until
 * SECONDS of wall time have passed, and with `churn` one more thread that
 * creates and joins short-lived threads all the while (the busy workload
 * of sched_ext's own CI: 4 compute threads plus thread churn). Prints what
 * it did; exits 0.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double deadline;
static volatile unsigned long sink;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *compute(void *arg)
{
	unsigned long n = 0, x = (unsigned long)arg + 1;
	while (now() < deadline) {
		for (int i = 0; i < 10000; i++)
			x = x * 6364136223846793005UL + 1442695040888963407UL;
		n++;
	}
	sink += x;
	return (void *)n;
}

static void *nothing(void *arg)
{
	sink += (unsigned long)arg;
	return NULL;
}

static void *churn(void *arg)
{
	unsigned long made = 0;
	(void)arg;
	while (now() < deadline) {
		pthread_t t;
		if (pthread_create(&t, NULL, nothing, (void *)made) == 0) {
			pthread_join(t, NULL);
			made++;
		}
	}
	return (void *)made;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: spin THREADS SECONDS [churn]\n");
		return 2;
	}
	int n = atoi(argv[1]);
	int with_churn = argc > 3 && strcmp(argv[3], "churn") == 0;
	deadline = now() + atof(argv[2]);
	pthread_t t[64], c;
	if (n < 1 || n > 64)
		return 2;
	for (long i = 0; i < n; i++)
		pthread_create(&t[i], NULL, compute, (void *)i);
	if (with_churn)
		pthread_create(&c, NULL, churn, NULL);
	unsigned long rounds = 0;
	for (int i = 0; i < n; i++) {
		void *r;
		pthread_join(t[i], &r);
		rounds += (unsigned long)r;
	}
	unsigned long made = 0;
	if (with_churn) {
		void *r;
		pthread_join(c, &r);
		made = (unsigned long)r;
	}
	printf("spin: %d thread(s), %lu round(s); %lu thread(s) churned\n", n, rounds, made);
	return 0;
}
