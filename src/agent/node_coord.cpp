// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/agent/node_coord.h"

#include "src/coord/etcd_client.h"

namespace stepwatch::agent {

namespace {

coord::EtcdOptions etcd_options(const CoordConfig& c) {
  coord::EtcdOptions o;
  o.endpoints = c.endpoints;
  o.token = c.token;
  o.timeout_ns = c.request_timeout_ns;
  return o;
}

}  // namespace

NodeCoord::NodeCoord(const CoordConfig& c, std::shared_ptr<coord::Kv> kv)
    : config(c),
      poll_kv(kv ? kv : std::make_shared<coord::EtcdClient>(etcd_options(c))),
      api_kv(kv ? kv : std::make_shared<coord::EtcdClient>(etcd_options(c))),
      // Two requests' time: a poll of hundreds of jobs on a healthy etcd spends a few ms.
      budget(*poll_kv, 2 * c.request_timeout_ns, [] { return mono_now_ns(); }),
      read_ahead(budget),
      etcd(read_ahead),
      session(etcd, coord::SessionOptions{c.prefix, c.node_name, c.lease_ttl_ns}),
      api_etcd(*api_kv),
      history(etcd, c.prefix, "", [] { return int64_t{0}; }) {}

}  // namespace stepwatch::agent
