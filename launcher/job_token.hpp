// The secret every connection to the job's store presents, so that strangers are turned away.
#pragma once

#include <string>

namespace canopy::launcher {

// 128 random bits from /dev/urandom as 32 lowercase hex digits; throws Error(System) when it cannot read
// them.
std::string generate_job_token();

}  // namespace canopy::launcher
