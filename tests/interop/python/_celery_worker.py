"""The Celery worker processes the celery program starts, and the environment of every Celery
process it starts."""
import os
import signal
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
APP_DIR = os.path.join(HERE, "celery_app")
SCRATCH = os.environ.get("INTEROP_TMP", "/tmp")


def app_env():
    """The environment of a Celery process this program starts: the apps' folder on its import
    path, after whatever is there (a *_pypi row's PyPI releases must stay ahead of Debian's)."""
    return dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), APP_DIR])))


class Worker:
    """`celery -A <app> worker`, as Celery's docs start one, with Celery's defaults (remote control,
    mingle, gossip and heartbeats on), the solo pool and concurrency 1."""

    def __init__(self, app_module, hostname, *options):
        self.hostname = hostname
        self.log_path = os.path.join(SCRATCH, f"worker-{app_module}.log")
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", app_module, "worker", "--pool=solo", "--concurrency=1",
                 "--loglevel=INFO", f"--hostname={hostname}", *options],
                cwd=SCRATCH, env=app_env(), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def ready(self):
        return f"{self.hostname} ready." in self.log()

    def stop(self):
        """Warm shutdown (SIGTERM); its log's end goes to stderr, shown when the client fails."""
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        print(f"--- log of worker {self.hostname}\n{self.log()[-6000:]}", file=sys.stderr)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False
