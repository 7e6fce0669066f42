"""A nats-server node's JetStream store on a small tmpfs of the soak's own, so that its disk can
be filled (a filler file taking every free byte) and freed again; unmounted on exit."""
import os
import subprocess

FILLER = ".soak-filler"


class SmallDisk:
    def __init__(self, path, size_mib):
        self.path, self.size_mib = path, size_mib
        self.mounted = False

    def mount(self):
        os.makedirs(self.path, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={self.size_mib}m,mode=0755", "soak-store", self.path],
                       check=True)
        self.mounted = True

    def fill(self):
        """Takes every free byte; returns how many."""
        stats = os.statvfs(self.path)
        free = stats.f_bavail * stats.f_frsize
        fd = os.open(os.path.join(self.path, FILLER), os.O_CREAT | os.O_WRONLY, 0o600)
        try:
            os.posix_fallocate(fd, 0, free)
        except OSError:
            pass  # the store grew meanwhile: what was taken is taken
        finally:
            os.close(fd)
        return free

    def free(self):
        try:
            os.remove(os.path.join(self.path, FILLER))
        except FileNotFoundError:
            pass

    def used_fraction(self):
        stats = os.statvfs(self.path)
        return 1 - stats.f_bavail / stats.f_blocks

    def unmount(self):
        if self.mounted:
            # lazy: a process that still holds a file there must not keep the mount alive
            subprocess.run(["umount", "-l", self.path], check=False)
            self.mounted = False
