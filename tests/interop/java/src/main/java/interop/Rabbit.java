package interop;

import com.rabbitmq.client.Connection;
import com.rabbitmq.client.ConnectionFactory;

/**
 * amqp-client connections to the server under test, as its API guide opens them (Spring AMQP's
 * connection factory wraps one of these too).
 */
public final class Rabbit {
    public final Interop interop;

    public Rabbit(Interop interop) {
        this.interop = interop;
    }

    /** A name of this client's own: every exchange and queue begins with the client name. */
    public String name(String suffix) {
        return interop.client + "-" + suffix;
    }

    /** A factory for AMQP_URL; over amqps it trusts the test CA and verifies the hostname. */
    public ConnectionFactory factory() throws Exception {
        ConnectionFactory factory = new ConnectionFactory();
        factory.setUri(interop.url);
        if (interop.tls()) {
            factory.useSslProtocol(Interop.trustTestCa());
            factory.enableHostnameVerification();
        }
        return factory;
    }

    public Connection connect(String purpose) throws Exception {
        return factory().newConnection(interop.client + "-" + purpose);
    }
}
