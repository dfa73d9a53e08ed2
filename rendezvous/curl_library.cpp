#include "rendezvous/curl_library.hpp"

#include "common/error.hpp"
#include "common/shared_library.hpp"

namespace canopy::rendezvous {
namespace {

template <typename Function>
void resolve(const SharedLibrary& library, const char* name, Function& function) {
  function = reinterpret_cast<Function>(library.symbol(name));
}

// A function table rather than forwarding definitions (common/shared_library.hpp): curl_easy_setopt takes
// its value through `...`, which no definition can pass on.
CurlLibrary load() {
  const SharedLibrary library({"libcurl.so.4"}, "the etcd store",
                              "install it (Debian: apt-get install libcurl4)");
  CurlLibrary curl{};
  decltype(&curl_global_init) global_init = nullptr;
  resolve(library, "curl_global_init", global_init);
  resolve(library, "curl_easy_init", curl.easy_init);
  resolve(library, "curl_easy_cleanup", curl.easy_cleanup);
  resolve(library, "curl_easy_reset", curl.easy_reset);
  resolve(library, "curl_easy_setopt", curl.easy_setopt);
  resolve(library, "curl_easy_perform", curl.easy_perform);
  resolve(library, "curl_easy_getinfo", curl.easy_getinfo);
  resolve(library, "curl_easy_strerror", curl.easy_strerror);
  resolve(library, "curl_slist_append", curl.slist_append);
  resolve(library, "curl_slist_free_all", curl.slist_free_all);
  if (global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
    fail(ErrorCode::System, "etcd store: libcurl could not be initialized (curl_global_init)");
  return curl;
}

}  // namespace

const CurlLibrary& curl_library() {
  static const CurlLibrary curl = load();  // a failed load throws, and the next call tries again
  return curl;
}

}  // namespace canopy::rendezvous
