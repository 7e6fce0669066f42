#!/bin/sh
# Client `java_amqp_client` of the interop matrix (tests/interop/README.md): RabbitMQ's Java
# client (com.rabbitmq:amqp-client, pinned by pom.xml), program in src/main/java/interop/amqpclient.
exec /bin/sh "$(dirname "$0")/_java.sh" interop.amqpclient.JavaAmqpClient
