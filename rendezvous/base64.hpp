// Base64 (RFC 4648, with padding): how etcd's JSON gateway carries keys and values, which are bytes.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace canopy::rendezvous {

std::string base64_encode(std::string_view bytes);
// nullopt when `text` is not padded base64.
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace canopy::rendezvous
