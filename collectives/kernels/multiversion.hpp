// CANOPY_MULTIVERSION: compile a function once per instruction set and let the dynamic loader pick the
// best one for the CPU at start-up (GCC/Clang target_clones, an ifunc), so that a single binary runs
// AVX2 loops where the CPU has them and SSE2 loops elsewhere. Empty where ifuncs are unavailable.
#pragma once

// Not under ThreadSanitizer: ifunc resolvers run, instrumented, before its runtime is up.
#if defined(__x86_64__) && defined(__ELF__) && defined(__has_attribute) && !defined(__SANITIZE_THREAD__)
#if __has_attribute(target_clones)
#define CANOPY_MULTIVERSION __attribute__((target_clones("avx2", "default")))
#define CANOPY_HAVE_X86_DISPATCH 1
#endif
#endif

#ifndef CANOPY_MULTIVERSION
#define CANOPY_MULTIVERSION
#endif
