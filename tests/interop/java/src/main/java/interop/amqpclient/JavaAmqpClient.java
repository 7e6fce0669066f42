package interop.amqpclient;

import com.rabbitmq.client.ConnectionFactory;
import interop.Interop;
import interop.Rabbit;

/**
 * The interop matrix's program for com.rabbitmq:amqp-client, RabbitMQ's Java client, used as its
 * API guide shows: a ConnectionFactory from the URL, channels, DefaultConsumer subclasses,
 * listeners for confirms, returns and recovery. Besides the standard scenarios it runs the
 * client's own features: asynchronous confirms, returns, qos, dead-lettering, direct reply-to.
 */
public final class JavaAmqpClient {
    public static void main(String[] args) throws Exception {
        Interop interop = new Interop("confirms_listener", "returns", "qos", "dead_letter", "direct_reply_to");
        interop.library("amqp-client", ConnectionFactory.class, "Maven Central");
        Rabbit rabbit = new Rabbit(interop);
        StandardScenarios standard = new StandardScenarios(rabbit);
        ExtraScenarios extra = new ExtraScenarios(rabbit);
        interop.run("declare", standard::declare);
        interop.run("publish_confirm", standard::publishConfirm);
        interop.run("consume_prefetch_ack", standard::consumePrefetchAck);
        interop.run("nack_requeue", standard::nackRequeue);
        interop.run("mandatory_return", standard::mandatoryReturn);
        interop.run("basic_get", standard::basicGet);
        interop.run("confirms_listener", extra::confirmsListener);
        interop.run("returns", extra::returns);
        interop.run("qos", extra::qos);
        interop.run("dead_letter", extra::deadLetter);
        interop.run("direct_reply_to", extra::directReplyTo);
        interop.run("reconnect", new Reconnect(rabbit)::run); // restarts the server: last
        interop.exit();
    }
}
