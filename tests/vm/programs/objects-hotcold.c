/* A program with a hot and a cold allocation site, for object tiering on the live machine
 * (tests/vm/cases/39-objects-hot-and-cold-sites.sh; docs/live.md, "Objects").
 *
 *   objects-hotcold HOT COLD MIB SECONDS RENEW_AT RENEW
 *
 * Allocates COLD objects of MIB MiB each from one call path (the cold site), writes them once and
 * never touches them again; then HOT objects of MIB MiB from another (the hot site), which it
 * reads and writes a word of every page of, over and over, for SECONDS seconds. At RENEW_AT
 * seconds it frees the first RENEW hot objects and allocates RENEW new ones from the same call
 * path, and right after their first touch reports on which node their pages landed: with the
 * hot site advised to node 0, there, however the program's own memory policy says. Every second
 * it reports where the two sites' pages are; at the end it checks every value it wrote.
 * It asks the kernel where its own pages are with move_pages(2) and no target nodes.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096
#define MAX_OBJECTS 1024

static size_t object_bytes;

/* Each site is a call path of its own: the runtime's site id hashes the return addresses. */
static __attribute__((noinline)) uint64_t *cold_alloc(void) { return malloc(object_bytes); }
static __attribute__((noinline)) uint64_t *hot_alloc(void) { return malloc(object_bytes); }

static double now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

/* The value of word w of page p of object o, as written: never 0, so that no page the program
 * wrote is all zeros. A kernel that splits a transparent huge page (Linux 6.12 on, as when a
 * huge page's move finds no huge page free on the target) maps each all-zero subpage to the
 * shared zero page, which move_pages reports as absent (-EFAULT): page 0 of cold object 0 was,
 * when the value there was 0. */
static uint64_t value(int o, size_t p, uint64_t round) { return ((uint64_t)(o + 1) << 40) ^ (p << 8) ^ round; }

static void fill(uint64_t *obj, int o, uint64_t round) {
	for (size_t p = 0; p < object_bytes / PAGE; p++) obj[p * (PAGE / 8)] = value(o, p, round);
}

/* Pages of the objects on `node`, and pages in all (absent pages are in neither; each is named,
 * with the status move_pages gave it). */
static void where(uint64_t **objs, int n, int node, long *on, long *all) {
	size_t per = object_bytes / PAGE;
	void **pages = malloc(per * sizeof(void *));
	int *status = malloc(per * sizeof(int));
	*on = *all = 0;
	for (int o = 0; o < n; o++) {
		for (size_t p = 0; p < per; p++) pages[p] = (char *)objs[o] + p * PAGE;
		if (syscall(SYS_move_pages, 0, per, pages, NULL, status, 0) != 0) {
			perror("move_pages");
			exit(2);
		}
		for (size_t p = 0; p < per; p++) {
			if (status[p] < 0) printf("objects-hotcold absent: object %d page %zu (%p): status %d\n", o, p, pages[p], status[p]);
			if (status[p] >= 0) (*all)++;
			if (status[p] == node) (*on)++;
		}
	}
	free(pages);
	free(status);
}

int main(int argc, char **argv) {
	if (argc != 7) {
		fprintf(stderr, "usage: objects-hotcold HOT COLD MIB SECONDS RENEW_AT RENEW\n");
		return 2;
	}
	int hot_n = atoi(argv[1]), cold_n = atoi(argv[2]), seconds = atoi(argv[4]);
	int renew_at = atoi(argv[5]), renew = atoi(argv[6]);
	object_bytes = (size_t)atoi(argv[3]) << 20;
	if (hot_n > MAX_OBJECTS || cold_n > MAX_OBJECTS || renew > hot_n || object_bytes == 0) {
		fprintf(stderr, "objects-hotcold: bad sizes\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	static uint64_t *hot[MAX_OBJECTS], *cold[MAX_OBJECTS];
	static uint64_t round_of[MAX_OBJECTS];
	for (int o = 0; o < cold_n; o++) {
		cold[o] = cold_alloc();
		fill(cold[o], o, 0);
	}
	double start = now();
	uint64_t round = 1;
	int next_report = 1;
	int renewed = 0;
	for (;;) {
		double t = now() - start;
		if (t >= seconds) break;
		/* One call path for every hot object, the first ones and the renewed ones. */
		for (int o = 0; o < hot_n; o++) {
			if (hot[o] == NULL || (t >= renew_at && !renewed && o < renew)) {
				free(hot[o]);
				hot[o] = hot_alloc();
				fill(hot[o], o, round);
				round_of[o] = round;
				if (hot[o] == NULL) return 3;
			}
		}
		if (t >= renew_at && !renewed) {
			long on, all;
			where(hot, renew, 0, &on, &all);
			printf("objects-hotcold renewed %d hot objects: %ld of %ld pages on node 0 at allocation\n", renew, on, all);
			renewed = 1;
		}
		/* A pass over the hot objects: check each word, write the next round's. */
		round++;
		for (int o = 0; o < hot_n; o++) {
			for (size_t p = 0; p < object_bytes / PAGE; p++) {
				uint64_t *w = &hot[o][p * (PAGE / 8)];
				if (*w != value(o, p, round_of[o])) {
					printf("objects-hotcold MISMATCH hot %d page %zu\n", o, p);
					return 4;
				}
				*w = value(o, p, round);
			}
			round_of[o] = round;
		}
		if (t >= next_report) {
			long h0, hall, c1, call;
			where(hot, hot_n, 0, &h0, &hall);
			where(cold, cold_n, 1, &c1, &call);
			printf("objects-hotcold t=%d hot %ld of %ld pages on node 0, cold %ld of %ld on node 1\n", next_report, h0,
			       hall, c1, call);
			next_report++;
		}
	}
	long h0, hall, c1, call;
	where(hot, hot_n, 0, &h0, &hall);
	where(cold, cold_n, 1, &c1, &call);
	printf("objects-hotcold end: hot %ld of %ld pages on node 0, cold %ld of %ld on node 1\n", h0, hall, c1, call);
	for (int o = 0; o < cold_n; o++)
		for (size_t p = 0; p < object_bytes / PAGE; p++)
			if (cold[o][p * (PAGE / 8)] != value(o, p, 0)) {
				printf("objects-hotcold MISMATCH cold %d page %zu\n", o, p);
				return 4;
			}
	printf("objects-hotcold values ok after %llu rounds\n", (unsigned long long)round);
	return 0;
}
