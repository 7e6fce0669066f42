package interop.spring;

import interop.Interop;
import java.util.concurrent.TimeUnit;
import org.springframework.amqp.rabbit.connection.CachingConnectionFactory;
import org.springframework.amqp.rabbit.connection.CorrelationData;
import org.springframework.amqp.rabbit.core.RabbitAdmin;
import org.springframework.amqp.rabbit.core.RabbitTemplate;
import org.springframework.context.ApplicationContext;

/** The application's beans a scenario uses, taken from the Spring context once. */
final class Spring {
    final ApplicationContext context;
    final RabbitConfig.Names names;
    final CachingConnectionFactory connectionFactory;
    final RabbitAdmin admin;
    final RabbitTemplate template;
    final RabbitConfig.Callbacks callbacks;

    Spring(ApplicationContext context) {
        this.context = context;
        this.names = context.getBean(RabbitConfig.Names.class);
        this.connectionFactory = context.getBean(CachingConnectionFactory.class);
        this.admin = context.getBean(RabbitAdmin.class);
        this.template = context.getBean(RabbitTemplate.class);
        this.callbacks = context.getBean(RabbitConfig.Callbacks.class);
    }

    /** Fails unless the server acked the publish that carried {@code correlation}. */
    static void expectAck(CorrelationData correlation) throws Exception {
        CorrelationData.Confirm confirm = correlation.getFuture().get(Interop.WAIT.toMillis(), TimeUnit.MILLISECONDS);
        Interop.check(confirm.ack(), "publish " + correlation.getId() + " was nacked: " + confirm.reason());
    }
}
