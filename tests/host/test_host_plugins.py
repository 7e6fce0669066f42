"""Host behaviour driven through a test-only plugin (tests/host/plugins/probe_plugin.cpp):
lazy mounting, a later row failing or overrunning, ABI refusal."""
import os
import subprocess
import time
import unittest

import cloudtest

PROBE_DIR = os.environ["CLOUDTEST_PROBE_DIR"]

PUBSUB = {"name": "pubsub", "eager": True, "prefixes": ["/v1/pubsub"], "library": "libcloud_pubsub.so"}


def probe_row(eager, name="probe", library="libcloud_test_probe.so"):
    return {"name": name, "eager": eager, "prefixes": [f"/v1/{name}"], "library": library,
            "requires": ["pubsub"]}


def make_cloud(rows, env=None, wait=True):
    """A Cloud whose plugin directory holds the real pubsub plugin and the test plugins."""
    cloud = cloudtest.Cloud(wait=wait, env=env)
    plugins = os.path.join(cloud.tmp, "plugins")
    os.makedirs(plugins)
    os.symlink(os.path.join(cloudtest.PLUGIN_DIR, "libcloud_pubsub.so"), os.path.join(plugins, "libcloud_pubsub.so"))
    for lib in ("libcloud_test_probe.so", "libcloud_test_wrong_abi.so"):
        os.symlink(os.path.join(PROBE_DIR, lib), os.path.join(plugins, lib))
    cloud.plugin_dir = plugins
    cloud.manifest = cloudtest.write_manifest(cloud.tmp, rows)
    cloud.rows = [r["name"] for r in rows]
    return cloud


def states(cloud):
    _, body = cloud.get("/v1/health")
    return {s["service"]: s["state"] for s in body["services"]}, body


class LazyRowTest(unittest.TestCase):
    def test_a_lazy_row_mounts_on_the_first_request_to_its_prefix(self):
        cloud = make_cloud([PUBSUB, probe_row(eager=False)])
        with cloud:
            self.assertEqual(states(cloud)[0], {"pubsub": "mounted", "probe": "lazy"})
            self.assertEqual(cloud.log_index("mounted probe"), -1)
            status, body = cloud.get("/v1/probe/anything")
            self.assertEqual(status, 404)  # mounted now; the plugin registers no routes
            self.assertIn("no route /v1/probe/anything in probe", body["error"])
            self.assertEqual(states(cloud)[0], {"pubsub": "mounted", "probe": "mounted"})
            # The harness reads the host's output on a thread of its own: the line the host wrote
            # before answering may not have been read yet when the answer arrives.
            self.assertTrue(cloudtest.wait_until(lambda: cloud.log_index("mounted probe") >= 0, 10), cloud.log)
            self.assertGreater(cloud.log_index("mounted probe"), cloud.log_index("http listening"))
            self.assertIn(f"cloud[probe]: probe sees pubsub url {cloud.pubsub_url}", cloud.log)
            self.assertEqual(cloud.get("/v1/probe/health"), (200, {"service": "probe", "status": "ok"}))
        self.assertEqual(cloud.proc.returncode, 0)
        self.assertLess(cloud.log_index("shutting down probe"), cloud.log_index("shutting down pubsub"))

    def test_a_lazy_mount_that_fails_answers_503_and_degrades_health(self):
        cloud = make_cloud([PUBSUB, probe_row(eager=False)], env={"CLOUD_PROBE_FAIL": "probe refuses; unset CLOUD_PROBE_FAIL"})
        with cloud:
            status, body = cloud.get("/v1/probe/x")
            self.assertEqual(status, 503)
            self.assertIn("probe is not mounted", body["error"])
            _, health = states(cloud)
            self.assertEqual(health["status"], "degraded")
            self.assertEqual(health["degraded"], [{"service": "probe",
                                                   "reason": "row 1 (probe): probe refuses; unset CLOUD_PROBE_FAIL"}])
            self.assertEqual(cloud.get("/v1/pubsub/health")[0], 200)


    def test_a_lazy_mount_that_overruns_answers_503_and_stop_still_exits(self):
        cloud = make_cloud([PUBSUB, probe_row(eager=False)],
                           env={"CLOUD_PROBE_MOUNT_MS": "30000", "CLOUD_STARTUP_TIMEOUT": "2s"})
        with cloud:
            status, _ = cloud.get("/v1/probe/x")
            self.assertEqual(status, 503)
            _, health = states(cloud)
            self.assertEqual(health["degraded"][0]["service"], "probe")
            self.assertIn("did not finish within the startup window", health["degraded"][0]["reason"])
            started = time.monotonic()
            code = cloud.stop()
            self.assertLess(time.monotonic() - started, 15)
        self.assertEqual(code, 0, cloud.log)
        self.assertIn("shutting down pubsub", cloud.log)
        self.assertIn("a lazy mount overran and was abandoned", cloud.log)


class LaterRowTest(unittest.TestCase):
    def boot_fails(self, rows, env):
        cloud = make_cloud(rows, env=env, wait=False)
        try:
            started = time.monotonic()
            cloud.start()
            code = cloud.wait_exit()
            took = time.monotonic() - started
            cloud.assert_no_nats_survives()
        finally:
            cloud.cleanup()
        self.assertNotEqual(code, 0, cloud.log)
        self.assertIn("mounted pubsub", cloud.log)
        self.assertIn("shutting down pubsub", cloud.log)  # reverse order: what mounted is undone
        self.assertNotIn("http listening", cloud.log)
        return cloud.log, took

    def test_a_failing_eager_row_shuts_down_what_mounted_before_it(self):
        log, _ = self.boot_fails([PUBSUB, probe_row(eager=True)], {"CLOUD_PROBE_FAIL": "probe cannot start; fix it"})
        self.assertIn("boot failed: row 1 (probe): probe cannot start; fix it", log)

    def test_an_overrunning_mount_aborts_boot_within_the_window(self):
        log, took = self.boot_fails([PUBSUB, probe_row(eager=True)],
                                    {"CLOUD_PROBE_MOUNT_MS": "30000", "CLOUD_STARTUP_TIMEOUT": "3s"})
        self.assertIn("boot failed: row 1 (probe): mount did not finish within the startup window "
                      "(CLOUD_STARTUP_TIMEOUT=3s)", log)
        self.assertLess(took, 20, "the host must not wait for the stuck mount")


class AbiTest(unittest.TestCase):
    def test_a_library_with_another_abi_version_is_refused_naming_the_file(self):
        rows = [PUBSUB, probe_row(eager=True, name="legacy", library="libcloud_test_wrong_abi.so")]
        cloud = make_cloud(rows, wait=False)
        try:
            cloud.start()
            code = cloud.wait_exit()
            cloud.assert_no_nats_survives()
            check = subprocess.run([cloudtest.CLOUD_BIN, "--check", "--manifest", cloud.manifest,
                                    "--plugin-dir", cloud.plugin_dir], capture_output=True, text=True)
            path = os.path.join(cloud.plugin_dir, "libcloud_test_wrong_abi.so")
        finally:
            cloud.cleanup()
        self.assertEqual(code, 1)
        self.assertRegex(cloud.log, rf"row 1 \(legacy\): {path} has plugin ABI version \d+ but this host speaks \d+")
        self.assertEqual(check.returncode, 1)
        self.assertIn("row 0 (pubsub): ok", check.stderr)
        self.assertIn(f"row 1 (legacy): {path} has plugin ABI version", check.stderr)

    def test_a_row_naming_another_plugin_is_refused(self):
        rows = [PUBSUB, probe_row(eager=True, name="other")]
        cloud = make_cloud(rows, wait=False)
        try:
            cloud.start()
            code = cloud.wait_exit()
            cloud.assert_no_nats_survives()
        finally:
            cloud.cleanup()
        self.assertEqual(code, 1)
        self.assertIn('row 1 (other): libcloud_test_probe.so is the plugin "probe", not "other"', cloud.log)


if __name__ == "__main__":
    unittest.main(verbosity=2)
