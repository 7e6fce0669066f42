package interop;

import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;

/**
 * What every Java client program of the interop matrix shares (tests/interop/README.md): the
 * environment the driver gives it, the SCENARIOS/LIBRARY/RESULT lines it prints, a time limit per
 * scenario, the server restart, and the test CA as an SSLContext.
 */
public final class Interop {
    /** Bounds every wait for an event (a delivery, a confirm, a return, a recovery). */
    public static final Duration WAIT = Duration.ofSeconds(30);

    /** Bounds a whole scenario, so that one stuck in an RPC is reported and the others still run. */
    private static final Duration SCENARIO_LIMIT = Duration.ofSeconds(120);

    /** A scenario's body: returns its verdict, or throws (an AssertionError included) to fail. */
    @FunctionalInterface
    public interface Scenario {
        Verdict run() throws Exception;
    }

    /** A scenario's outcome other than fail: pass (with an optional note) or refused by design. */
    public record Verdict(String word, String note) {
        public static Verdict pass() {
            return new Verdict("pass", "");
        }

        public static Verdict refused(String reason) {
            return new Verdict("refused", reason);
        }
    }

    public final String client = require("INTEROP_CLIENT");
    public final String url = require("AMQP_URL");
    private boolean failed;

    /** Prints the SCENARIOS line: the extras this client must report besides the standard seven. */
    public Interop(String... extras) {
        System.out.println("SCENARIOS " + client + " " + String.join(" ", extras));
    }

    public boolean tls() {
        return url.startsWith("amqps://");
    }

    /** Prints the LIBRARY line, the version read from the manifest of the jar that holds {@code type}. */
    public void library(String name, Class<?> type, String origin) {
        String version = type.getPackage().getImplementationVersion();
        System.out.println("LIBRARY " + client + " " + name + " " + (version == null ? "unknown" : version) + " (" + origin + ")");
    }

    /** Runs one scenario under SCENARIO_LIMIT and prints its RESULT line. */
    public void run(String scenario, Scenario body) {
        ExecutorService thread = Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, scenario);
            t.setDaemon(true); // a scenario stuck past its limit must not keep the JVM alive
            return t;
        });
        String line;
        try {
            Future<Verdict> verdict = thread.submit(body::run);
            Verdict v = verdict.get(SCENARIO_LIMIT.toSeconds(), TimeUnit.SECONDS);
            line = v.word() + (v.note().isEmpty() ? "" : " " + v.note());
        } catch (TimeoutException e) {
            line = "fail did not finish within " + SCENARIO_LIMIT.toSeconds() + "s";
        } catch (ExecutionException e) {
            Throwable cause = e.getCause();
            cause.printStackTrace();
            line = "fail " + describe(cause);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            line = "fail interrupted";
        } finally {
            thread.shutdownNow();
        }
        failed |= line.startsWith("fail");
        System.out.println("RESULT " + client + " " + scenario + " " + oneLine(line));
    }

    /** Exits 0 iff no scenario failed (explicitly: client libraries leave non-daemon threads). */
    public void exit() {
        System.out.flush();
        System.exit(failed ? 1 : 0);
    }

    /** Fails the scenario with {@code what} unless {@code condition} holds. */
    public static void check(boolean condition, String what) {
        if (!condition) {
            throw new AssertionError(what);
        }
    }

    /** Fails unless {@code got} equals {@code expected}; {@code what} names the value. */
    public static void expect(Object expected, Object got, String what) {
        check(expected == null ? got == null : expected.equals(got),
              what + ": expected " + expected + ", got " + got);
    }

    /** Runs CLOUD_RESTART_CMD: the server stops (closing every connection) and is back on the same port. */
    public static void restartServer() throws IOException, InterruptedException {
        Process restart = new ProcessBuilder("sh", "-c", require("CLOUD_RESTART_CMD"))
            .redirectOutput(ProcessBuilder.Redirect.INHERIT)
            .redirectError(ProcessBuilder.Redirect.INHERIT)
            .start();
        check(restart.waitFor(WAIT.toSeconds() * 4, TimeUnit.SECONDS), "CLOUD_RESTART_CMD did not finish");
        expect(0, restart.exitValue(), "CLOUD_RESTART_CMD's exit status");
    }

    /**
     * The test CA of the TLS twin as an SSLContext. Java does not read SSL_CERT_FILE, so its PEM
     * certificates go into a KeyStore that a TrustManagerFactory trusts, as the JSSE guide does.
     */
    public static SSLContext trustTestCa() throws IOException, GeneralSecurityException {
        KeyStore trusted = KeyStore.getInstance(KeyStore.getDefaultType());
        trusted.load(null, null);
        List<Certificate> certificates = new ArrayList<>();
        try (InputStream pem = new FileInputStream(require("SSL_CERT_FILE"))) {
            certificates.addAll(CertificateFactory.getInstance("X.509").generateCertificates(pem));
        }
        check(!certificates.isEmpty(), "SSL_CERT_FILE holds no certificate");
        for (int i = 0; i < certificates.size(); i++) {
            trusted.setCertificateEntry("test-ca-" + i, certificates.get(i));
        }
        TrustManagerFactory trust = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        trust.init(trusted);
        SSLContext context = SSLContext.getInstance("TLS");
        context.init(null, trust.getTrustManagers(), null);
        return context;
    }

    private static String require(String name) {
        String value = System.getenv(name);
        if (value == null || value.isEmpty()) {
            throw new IllegalStateException(name + " is not set (the interop driver sets it)");
        }
        return value;
    }

    private static String describe(Throwable t) {
        StringBuilder s = new StringBuilder(t instanceof AssertionError ? "" : t.getClass().getSimpleName() + ": ");
        s.append(t.getMessage());
        for (Throwable c = t.getCause(); c != null && c != c.getCause(); c = c.getCause()) {
            s.append(" / caused by ").append(c.getClass().getSimpleName()).append(": ").append(c.getMessage());
        }
        return s.toString();
    }

    private static String oneLine(String s) {
        return s.replaceAll("\\s+", " ").trim();
    }
}
