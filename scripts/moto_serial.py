"""moto_server with one request handled at a time.

moto's DynamoDB backend checks a ConditionExpression and then applies the write without a
lock, and moto_server serves requests on threads: two racing conditional writes can both
"win" (seen here: 2 of 8 concurrent creates). Real DynamoDB and S3 are atomic per item, so
the tests need an emulator that is too. This wrapper keeps moto's threaded server (many
open connections) but runs the application under one global lock.

Usage: python moto_serial.py HOST PORT
"""

import sys
import threading

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


if __name__ == "__main__":
    host, port = sys.argv[1], int(sys.argv[2])
    run_simple(host, port, serial, threaded=True, request_handler=MotoRequestHandler)
