#!/bin/sh
# Client `spring_amqp` of the interop matrix (tests/interop/README.md): Spring AMQP without Spring
# Boot (org.springframework.amqp:spring-rabbit, pinned by pom.xml), program in
# src/main/java/interop/spring.
exec /bin/sh "$(dirname "$0")/_java.sh" interop.spring.SpringAmqp
