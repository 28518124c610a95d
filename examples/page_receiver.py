#!/usr/bin/python3
# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
"""A webhook receiver for the demo: prints every page stepwatch sends and writes it to a file.

    /usr/bin/python3 examples/page_receiver.py PORT_FILE PAGES_FILE
"""
import http.server
import json
import sys


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        page = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        with open(sys.argv[2], "a") as f:
            f.write(json.dumps(page) + "\n")
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
with open(sys.argv[1], "w") as f:
    f.write(str(server.server_address[1]))
server.serve_forever()
