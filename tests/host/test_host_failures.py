"""Boots that must fail closed: a clear reason naming the row or variable, non-zero exit, no
port left open and no nats-server left running."""
import os
import shutil
import socket
import tempfile
import unittest

import cloudtest


class FailClosedTest(unittest.TestCase):
    def boot_fails(self, **kwargs):
        cloud = cloudtest.Cloud(wait=False, **kwargs)
        try:
            cloud.start()
            code = cloud.wait_exit()
            cloud.assert_no_nats_survives()
            self.assertNotEqual(code, 0, cloud.log)
            self.assertNotIn("http listening", cloud.log)
            self.assertFalse(cloudtest.Cloud._accepts(cloud.amqp_port))
            return cloud.log
        finally:
            cloud.cleanup()

    def test_a_taken_pubsub_port_fails_boot_naming_it(self):
        with socket.socket() as holder:
            holder.bind(("127.0.0.1", 0))
            holder.listen()
            port = holder.getsockname()[1]
            log = self.boot_fails(env={"CLOUD_PUBSUB_PORT": str(port)})
        self.assertIn(f"boot failed: row 0 (pubsub): CLOUD_PUBSUB_PORT={port}: cannot bind 127.0.0.1:{port}", log)
        self.assertIn("Address already in use", log)
        self.assertNotIn("mounted pubsub", log)

    def test_a_malformed_startup_timeout_is_refused_naming_it(self):
        log = self.boot_fails(env={"CLOUD_STARTUP_TIMEOUT": "soon"})
        self.assertIn('CLOUD_STARTUP_TIMEOUT="soon" is malformed', log)
        self.assertNotIn("nats-server (pid", log)

    def test_a_startup_window_overrun_aborts_boot(self):
        log = self.boot_fails(env={"CLOUD_STARTUP_TIMEOUT": "1ms"})
        self.assertIn("boot failed: row 0 (pubsub): ", log)
        self.assertIn("startup window", log)
        self.assertIn("CLOUD_STARTUP_TIMEOUT", log)

    def test_a_missing_nats_server_binary_fails_boot_naming_it(self):
        log = self.boot_fails(env={"NATS_SERVER_BIN": "/nonexistent/nats-server"})
        self.assertIn('row 0 (pubsub): nats-server not found (NATS_SERVER_BIN="/nonexistent/nats-server")', log)

    def test_a_missing_default_nats_server_fails_boot_naming_the_path_and_the_remedy(self):
        """NATS_SERVER_BIN unset and no bin/nats-server beside the plugin directory (a copy of the
        pubsub plugin alone): the boot names the path it tried, NATS_SERVER_BIN and the remedy."""
        root = tempfile.mkdtemp(prefix="cloudtest-noserver-")
        try:
            plugins = os.path.join(root, "lib", "cloud", "plugins")
            os.makedirs(plugins)
            shutil.copy(os.path.join(cloudtest.PLUGIN_DIR, "libcloud_pubsub.so"), plugins)
            rows = [r for r in cloudtest.manifest_rows() if r["name"] == "pubsub"]
            manifest = cloudtest.write_manifest(root, rows)
            log = self.boot_fails(manifest=manifest, plugin_dir=plugins, env={"NATS_SERVER_BIN": None})
        finally:
            shutil.rmtree(root, ignore_errors=True)
        tried = os.path.join(root, "lib", "cloud", "bin", "nats-server")
        self.assertIn(f"row 0 (pubsub): nats-server not found at {tried} (NATS_SERVER_BIN is unset", log)
        self.assertIn("set NATS_SERVER_BIN to a nats-server's path", log)
        self.assertIn("reinstall the cloud package", log)

    def test_a_malformed_pubsub_variable_fails_boot_naming_it(self):
        log = self.boot_fails(env={"CLOUD_PUBSUB_MAX_PAYLOAD": "lots"})
        self.assertIn('row 0 (pubsub): CLOUD_PUBSUB_MAX_PAYLOAD="lots" is malformed', log)

    def test_an_unreachable_pubsub_url_fails_boot_naming_it(self):
        url = f"nats://127.0.0.1:{cloudtest.free_port()}"
        log = self.boot_fails(env={"CLOUD_PUBSUB_URL": url, "CLOUD_STARTUP_TIMEOUT": "2s"})
        self.assertIn(f'row 0 (pubsub): CLOUD_PUBSUB_URL="{url}" is not reachable', log)

    def test_a_library_missing_from_the_plugin_dir_fails_naming_the_row(self):
        cloud = cloudtest.Cloud(wait=False)
        try:
            rows = [r for r in cloudtest.manifest_rows() if cloudtest.have_plugin(r["library"])]
            rows.append({"name": "ghost", "eager": True, "prefixes": ["/v1/ghost"],
                         "library": "libcloud_ghost.so"})
            cloud.manifest = cloudtest.write_manifest(cloud.tmp, rows)
            cloud.start()
            code = cloud.wait_exit()
        finally:
            cloud.cleanup()
        self.assertEqual(code, 1)
        self.assertIn(f"row {len(rows) - 1} (ghost): library libcloud_ghost.so does not exist in "
                      f"{cloudtest.PLUGIN_DIR}", cloud.log)
        self.assertNotIn("mounted", cloud.log)  # the manifest is checked before anything mounts


class BadPluginTest(unittest.TestCase):
    def test_a_failed_later_mount_shuts_down_pubsub_and_leaves_no_child(self):
        """amqp pointed at a port already taken: its mount fails after pubsub mounted, so
        pubsub must be shut down again (reverse order) and nats-server must be gone."""
        if not cloudtest.have_plugin("libcloud_amqp.so"):
            self.skipTest("libcloud_amqp.so is not built in this tree")
        with socket.socket() as holder:
            holder.bind(("127.0.0.1", 0))
            holder.listen()
            port = holder.getsockname()[1]
            cloud = cloudtest.Cloud(wait=False, env={"CLOUD_AMQP_PORT": str(port)})
            try:
                cloud.start()
                code = cloud.wait_exit()
                cloud.assert_no_nats_survives()
            finally:
                cloud.cleanup()
        self.assertNotEqual(code, 0)
        self.assertIn("mounted pubsub", cloud.log)
        self.assertIn("boot failed: row 1 (amqp): ", cloud.log)
        self.assertIn("shutting down pubsub", cloud.log)


if __name__ == "__main__":
    unittest.main(verbosity=2)
