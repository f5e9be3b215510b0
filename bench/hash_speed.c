/* bench/hash_speed.c: XXH3-64 over 64 KiB segments (TierFS's block checksums), through
 * libxxhash's plain entry point (compiled for the baseline, SSE2 on x86-64) and through its
 * CPU dispatcher (AVX-512/AVX2 where present), which common/hash.cc uses. Both give the
 * same sums (checked here, and pinned by common/hash_test.cc).
 *
 *   cc -O2 -o /tmp/hash_speed bench/hash_speed.c -lxxhash && /tmp/hash_speed
 *
 * Prints GiB/s of each, median of 5 passes over a 4 MiB block hashed 256 times, the block
 * in the CPU's cache or not as it happens (4 MiB: mostly not). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#define XXH_DISPATCH_DISABLE_REPLACE 1 /* keep XXH3_64bits the plain entry point */
#include <xxh_x86dispatch.h>
#include <xxhash.h>

enum { kBlock = 4 << 20, kSeg = 64 << 10, kRounds = 256, kPasses = 5 };

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static double pass(const char* b, int dispatch, unsigned long long* acc) {
  double t0 = now();
  for (int r = 0; r < kRounds; r++) {
    for (size_t o = 0; o < kBlock; o += kSeg) {
      *acc += dispatch ? XXH3_64bits_dispatch(b + o, kSeg) : XXH3_64bits(b + o, kSeg);
    }
  }
  return (double)kBlock * kRounds / (1 << 30) / (now() - t0);
}

int main(void) {
  char* b = malloc(kBlock);
  for (size_t i = 0; i < kBlock; i++) b[i] = (char)((i * 2654435761u) >> 13);
  unsigned long long plain = 0, disp = 0;
  double g[2][kPasses];
  for (int p = 0; p < kPasses; p++) {  /* interleaved */
    g[0][p] = pass(b, 0, &plain);
    g[1][p] = pass(b, 1, &disp);
  }
  if (plain != disp) {
    fprintf(stderr, "the dispatcher's sums differ from the plain code's\n");
    return 1;
  }
  for (int k = 0; k < 2; k++) qsort(g[k], kPasses, sizeof(double), cmp);
  printf("XXH3-64, 64 KiB segments: plain %.1f GiB/s (%.1f-%.1f), dispatch %.1f GiB/s (%.1f-%.1f)\n", g[0][2], g[0][0],
         g[0][4], g[1][2], g[1][0], g[1][4]);
  free(b);
  return 0;
}
