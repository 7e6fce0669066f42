module interop/amqp091_go

go 1.22

require github.com/rabbitmq/amqp091-go v1.17.0
