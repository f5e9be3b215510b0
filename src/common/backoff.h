// Jittered exponential backoff for retries, shared by every engine and store.
#pragma once

#include <chrono>
#include <random>

namespace tierfs {

// A pause drawn uniformly from [d/2, d] with d = min(cap, base * 2^attempt) (attempt >= 0;
// the exponent stops growing at 20). The jitter keeps clients that collided once from
// colliding again in lockstep.
std::chrono::microseconds JitteredBackoff(int attempt, std::chrono::microseconds base,
                                          std::chrono::microseconds cap);

// This thread's random generator, reseeded after fork() so that parent and child do not
// share a sequence.
std::mt19937_64& ThreadRng();

}  // namespace tierfs
