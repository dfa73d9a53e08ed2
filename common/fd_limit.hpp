// Running out of file descriptors is a limit to raise, not a bug: every call that makes a descriptor
// (socket, accept, eventfd, memfd, open) reports it with one message naming the limit and its fix.
#pragma once

#include <sys/resource.h>

#include <cerrno>
#include <string>
#include <string_view>

namespace canopy {

// EMFILE (this process reached its RLIMIT_NOFILE) or ENFILE (the system's file table is full).
bool out_of_descriptors(int err);

// Descriptors this process has open (the entries of /proc/self/fd), or -1 when it cannot tell.
int open_descriptor_count();

// "unlimited" or the number.
std::string limit_text(rlim_t limit);

// The message of Error(Resource) for `what` failing with `err` (EMFILE or ENFILE): the soft and hard
// RLIMIT_NOFILE, how many descriptors are open, `need` (what the caller knows it needs, "" when nothing)
// and how to raise the limit.
std::string descriptor_limit_message(std::string_view what, int err, std::string_view need = {});

// Error(Resource) with that message when `err` is EMFILE or ENFILE; otherwise Error(System) with `what`
// and the errno's text, as fail_errno.
[[noreturn]] void fail_descriptor_call(std::string_view what, int err = errno, std::string_view need = {});

}  // namespace canopy
