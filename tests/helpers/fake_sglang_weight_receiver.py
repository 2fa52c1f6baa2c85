"""A stand-in for an SGLang engine's distributed weight-update routes, for CPU tests over gloo.

    python tests/helpers/fake_sglang_weight_receiver.py OUT.pt

Prints its URL on stdout, then serves /init_weights_update_group, /update_weights_from_distributed and
/destroy_weights_update_group the way SGLang 0.5 does: it joins the trainer's group through a TCP rendezvous
and a PrefixStore named after the group (sglang/srt/utils/common.py init_custom_process_group), and receives each
announced tensor by a broadcast from group rank 0 into a fresh tensor of the announced dtype and shape. On
destroy it writes the requests it got and the tensors it received to OUT.pt and exits.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, HTTPServer

import torch
import torch.distributed as dist
from torch.distributed.distributed_c10d import Backend, PrefixStore, _new_process_group_helper, rendezvous

state = {"group": None, "requests": [], "received": {}}


def init_group(body):
    timeout = timedelta(seconds=60)
    init = f"tcp://{body['master_address']}:{body['master_port']}"
    store, rank, size = next(rendezvous(init, body["rank_offset"], body["world_size"], timeout=timeout))
    store.set_timeout(timeout)
    state["group"], _ = _new_process_group_helper(size, rank, [], Backend(body["backend"]),
                                                  PrefixStore(body["group_name"], store),
                                                  group_name=body["group_name"], timeout=timeout)


def receive(body):
    for name, dtype, shape in zip(body["names"], body["dtypes"], body["shapes"]):
        tensor = torch.empty(shape, dtype=getattr(torch, dtype))
        dist.broadcast(tensor, group=state["group"], group_src=0)
        state["received"][name] = tensor


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        state["requests"].append((self.path, body))
        if self.path == "/init_weights_update_group":
            init_group(body)
        elif self.path == "/update_weights_from_distributed":
            receive(body)
        elif self.path == "/destroy_weights_update_group":
            state["group"] = None  # released with its last reference (destroy_process_group does not know it)
            torch.save({"requests": state["requests"], "received": state["received"]}, sys.argv[1])
            threading.Thread(target=self.server.shutdown).start()
        data = json.dumps({"success": True, "message": "ok"}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    server = HTTPServer(("127.0.0.1", 0), Handler)
    print(f"http://127.0.0.1:{server.server_address[1]}", flush=True)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    server.serve_forever()
