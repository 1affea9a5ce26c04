"""What every module of the local Hub shares: the error type answered in the Hub's shape, the
stderr log, ISO dates, and the plain view's URL prefix (known to dispatch and to routing)."""

import sys
import time

# The plain HTTP view's root on the API origin (see routes_plain).
PLAIN_PREFIX = "/_plain/"


def log(msg):
    sys.stderr.write("hub_server: %s\n" % msg)
    sys.stderr.flush()


def iso_time(seconds):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + ".%03dZ" % int(
        (seconds % 1) * 1000)


class HubError(Exception):
    """An error answer in the Hub's shape: status, X-Error-Code, message."""

    def __init__(self, status, code, message, headers=None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or {}
