// libcurl, loaded when the first etcd store opens rather than linked into every program: its dependencies
// (TLS, Kerberos, LDAP, about 30 libraries) would otherwise be loaded by every rank of every job at
// start-up, where the embedded TcpStore needs none of them (docs/ETCD.md).
#pragma once

#include <curl/curl.h>

namespace canopy::rendezvous {

// The functions of libcurl's easy interface that the etcd client calls, resolved from libcurl.so.4.
struct CurlLibrary {
  decltype(&curl_easy_init) easy_init;
  decltype(&curl_easy_cleanup) easy_cleanup;
  decltype(&curl_easy_reset) easy_reset;
  decltype(&curl_easy_setopt) easy_setopt;
  decltype(&curl_easy_perform) easy_perform;
  decltype(&curl_easy_getinfo) easy_getinfo;
  decltype(&curl_easy_strerror) easy_strerror;
  decltype(&curl_slist_append) slist_append;
  decltype(&curl_slist_free_all) slist_free_all;
};

// Loads libcurl and initializes it once per process; Error(Config) naming the library and the package that
// brings it where it cannot be loaded.
const CurlLibrary& curl_library();

}  // namespace canopy::rendezvous
