// How fast this machine's CPU runs right now: a fixed piece of work, timed.
//
// On the shared virtual machines we benchmark on, the same work takes 66 ms in one second and 181 ms
// a few seconds later (no steal time reported), and every timing moves with it: a 2-rank 4-byte
// all-reduce took 5.1 us while the work took 66 ms and 7.5-10.3 us while it took 180. Timing the work
// before and after each run says whether two runs being compared met the same machine.
#pragma once

namespace canopy::bench {

// Milliseconds a fixed chain of dependent integer operations takes on the calling thread (about 35 ms
// on our 2-core machines at their fastest). Pure CPU: no memory traffic, no system calls.
double fixed_work_milliseconds();

}  // namespace canopy::bench
