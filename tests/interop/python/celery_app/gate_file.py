"""What the gate tasks of both interop apps share: holding a worker until the client says go."""
import os
import time


def hold_until(path):
    """Announces the task started (`path`.started), then waits until `path` exists."""
    open(path + ".started", "w").close()
    deadline = time.monotonic() + float(os.environ.get("INTEROP_WAIT", "60"))
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} never appeared")
        time.sleep(0.02)
    return "opened"
