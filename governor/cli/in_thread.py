"""The governor's app served by uvicorn on a thread of this process, on a socket that already
listens: for a command that serves while it does its own work beside it (the demo)."""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass

import uvicorn
from fastapi import FastAPI

STOP_WAIT_S = 10.0  # how long stopping waits for the requests in flight


@dataclass
class InThread:
    server: uvicorn.Server
    thread: threading.Thread

    def start(self) -> bool:
        """Start serving; whether the server started (if not, its log says why)."""
        self.thread.start()
        while not self.server.started and self.thread.is_alive():
            time.sleep(0.05)
        return bool(self.server.started)

    @property
    def serving(self) -> bool:
        return self.thread.is_alive()

    def stop(self) -> None:
        """Stop taking requests, finish those in flight and shut the app down (its lifespan
        ends: the scheduler stops)."""
        self.server.should_exit = True
        self.thread.join(STOP_WAIT_S)


def in_thread(app: FastAPI, listener: socket.socket) -> InThread:
    """The app, to be served on `listener` by a thread of this process once started. The
    logging stays as the process set it up, without request logs."""
    config = uvicorn.Config(app, workers=1, log_level="warning", log_config=None, access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    return InThread(server, thread)
