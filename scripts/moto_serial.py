"""moto_server with one request handled at a time.

moto's DynamoDB backend checks a ConditionExpression and then applies the write without a
lock, and moto_server serves requests on threads: two racing conditional writes can both
"win" (seen here: 2 of 8 concurrent creates; moto's S3 `put_object` checks `If-Match` the
same way). Real DynamoDB and S3 are atomic per item and per key, so the tests need an
emulator that is too. This wrapper keeps moto's threaded server (many open connections)
but runs the application under one global lock.

Usage: python moto_serial.py HOST PORT [--exit-with-parent]

With --exit-with-parent (test binaries that start their own instance), a watchdog ends
the server when the process that started it is gone, and werkzeug logs errors only.
"""

import logging
import os
import sys
import threading
import time

from werkzeug.serving import run_simple
from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)

LOCK = threading.Lock()
APP = DomainDispatcherApplication(create_backend_app)


def serial(environ, start_response):
    with LOCK:
        # Consume the whole response inside the lock: the write happens here.
        return list(APP(environ, start_response))


def exit_with(parent):
    while os.getppid() == parent:
        time.sleep(0.2)
    os._exit(0)


if __name__ == "__main__":
    host, port = sys.argv[1], int(sys.argv[2])
    os.environ["MOTO_PORT"] = str(port)
    if "--exit-with-parent" in sys.argv[3:]:
        threading.Thread(target=exit_with, args=(os.getppid(),), daemon=True).start()
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
    run_simple(host, port, serial, threaded=True, request_handler=MotoRequestHandler)
