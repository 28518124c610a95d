// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The HTTP side of the etcd client (etcd_client.h): one kept cpp-httplib client per endpoint,
// failover from the endpoint that answered last, the timeouts, the token, and cpp-httplib
// 0.11.4's trouble with the gateway's error replies. It knows no JSON: etcd_client.cpp builds
// the bodies and reads the replies. The one translation unit of coord/ with cpp-httplib.
#pragma once

#include <memory>
#include <string>

#include "src/common/result.h"
#include "src/coord/etcd_client.h"

namespace stepwatch::coord {

struct GatewayReply {
  int status = 0;    // 200, or the error status a server answered with
  std::string body;  // the whole body
};

class Gateway {
 public:
  explicit Gateway(const EtcdOptions& options);
  ~Gateway();
  Gateway(Gateway&&) noexcept;
  Gateway& operator=(Gateway&&) noexcept;

  // Sends one request to the endpoints in turn, from the one that answered last, and returns
  // the first answer that is not a 503 (an unavailable member: another may serve it); kIo
  // naming each endpoint and why when none answered. `resend`: whether the request may go on
  // to the next endpoint once it may have reached a server (not a txn: it may have been
  // applied). Unusable options: kInvalidArgument from every call.
  Result<GatewayReply> call(const char* method, const char* path, const std::string& body,
                            bool resend);

  // The endpoint that answered last (the first one before any answer).
  const std::string& endpoint() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace stepwatch::coord
