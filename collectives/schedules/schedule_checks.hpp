// What can be checked of one rank's schedule alone, before anything runs: every dependency is an
// earlier step, every peer another rank, every block inside its buffer, nothing writes the caller's
// input, and a RecvReduce's blocks fit together. The simulator runs these on every rank it builds, then
// checks what only running all ranks together shows (messages that meet, deadlock).
#pragma once

#include <string>

#include "collectives/schedules/schedule.hpp"

namespace canopy::collectives {

// "Data[0..8)"
std::string describe(const Block& block);
// "Send Data[0..8) to rank 1, tag 0x3"
std::string describe(const Step& step);

// Whether the call's input is a buffer of its own (Buffer::Input), not already in Data.
bool separate_input(const CollectiveCall& call);

// Throws Error(Protocol) "<context>: rank r step i (<step>): <what is wrong>" for the first fault.
void check_rank_schedule(const Schedule& schedule, const CollectiveCall& call, const std::string& context);

}  // namespace canopy::collectives
