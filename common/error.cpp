#include "canopy/error.hpp"

namespace canopy {

std::string_view to_string(ErrorCode code) {
  switch (code) {
    case ErrorCode::InvalidArgument: return "invalid argument";
    case ErrorCode::Config: return "configuration error";
    case ErrorCode::Timeout: return "timeout";
    case ErrorCode::PeerFailed: return "peer failed";
    case ErrorCode::Mismatch: return "collective mismatch";
    case ErrorCode::Protocol: return "protocol error";
    case ErrorCode::Aborted: return "aborted";
    case ErrorCode::System: return "system error";
    case ErrorCode::Resource: return "resource limit";
    case ErrorCode::Revoked: return "revoked";
  }
  return "unknown error";
}

}  // namespace canopy
