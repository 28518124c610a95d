// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The one wording of an HTTP client's failure, for every HTTP client of stepwatch: the pager
// (runbook/pager_http.cpp), the etcd gateway (coord/gateway.cpp) and the CLI's agent client
// (cli/agent_client.cpp). It takes cpp-httplib's name of the error (httplib::to_string of an
// httplib::Error: "Connection", "ConnectionTimeout", ...), a plain string, so that common stays
// free of httplib and of its enum's numbering, which changes between releases.
#pragma once

#include <string>
#include <string_view>

namespace stepwatch {

// One line: "cannot connect (refused or unreachable)", "connect timed out", ...; a name it does
// not know reads "request failed: <name>".
std::string http_error_text(std::string_view httplib_error_name);

}  // namespace stepwatch
