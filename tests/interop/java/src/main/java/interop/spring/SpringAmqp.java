package interop.spring;

import interop.Interop;
import interop.Rabbit;
import org.springframework.amqp.rabbit.core.RabbitTemplate;
import org.springframework.context.annotation.AnnotationConfigApplicationContext;

/**
 * The interop matrix's program for Spring AMQP (spring-rabbit) without Spring Boot: a plain
 * annotation-configured application context (RabbitConfig) whose connection factory, admin and
 * template the scenarios use, with listener containers for consuming. Besides the standard
 * scenarios it runs Spring's own features: listener concurrency, rejection to a DLQ,
 * request/reply, JSON conversion, and a channel-transacted template.
 */
public final class SpringAmqp {
    public static void main(String[] args) throws Exception {
        Interop interop = new Interop("listener_concurrency", "reject_to_dlq", "send_and_receive",
                                      "json_conversion", "channel_transacted");
        interop.library("spring-rabbit", RabbitTemplate.class, "Maven Central; on amqp-client "
                        + com.rabbitmq.client.ConnectionFactory.class.getPackage().getImplementationVersion());
        try (AnnotationConfigApplicationContext context = new AnnotationConfigApplicationContext()) {
            context.registerBean(Rabbit.class, () -> new Rabbit(interop));
            context.register(RabbitConfig.class);
            context.refresh();
            Spring spring = new Spring(context);
            StandardScenarios standard = new StandardScenarios(spring);
            ExtraScenarios extra = new ExtraScenarios(spring);
            interop.run("declare", standard::declare);
            interop.run("publish_confirm", standard::publishConfirm);
            interop.run("consume_prefetch_ack", standard::consumePrefetchAck);
            interop.run("nack_requeue", standard::nackRequeue);
            interop.run("mandatory_return", standard::mandatoryReturn);
            interop.run("basic_get", standard::basicGet);
            interop.run("listener_concurrency", extra::listenerConcurrency);
            interop.run("reject_to_dlq", extra::rejectToDlq);
            interop.run("send_and_receive", extra::sendAndReceive);
            interop.run("json_conversion", extra::jsonConversion);
            interop.run("channel_transacted", extra::channelTransacted);
            interop.run("reconnect", new Reconnect(spring)::run); // restarts the server: last
        }
        interop.exit();
    }
}
