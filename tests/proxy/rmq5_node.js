// The official Node.js 5.x client against mqtool's gRPC endpoint: sends (tags, keys, one body far above
// HTTP/2's first windows), then a SimpleConsumer receives and acks them. One JSON line a step on stdout.
const { Producer, SimpleConsumer } = require('rocketmq-client-nodejs');

async function main(endpoints, topic, group) {
  const producer = new Producer({ endpoints });
  await producer.startup();
  const sent = [];
  for (let i = 0; i < 4; i++) {
    const body = Buffer.from(i === 3 ? 'big-' + 'x'.repeat(1 << 20) : 'from-node-' + i);
    const receipt = await producer.send({ topic, tag: 'NodeTag', keys: ['nk' + i], body });
    sent.push(receipt.messageId);
  }
  console.log(JSON.stringify({ sent }));
  await producer.shutdown();
  const consumer = new SimpleConsumer({ consumerGroup: group, endpoints, awaitDuration: 3000,
                                        subscriptions: new Map().set(topic, 'NodeTag') });
  await consumer.startup();
  const received = [];
  for (let round = 0; round < 10 && received.length < sent.length; round++) {
    for (const message of await consumer.receive(16)) {
      received.push({ id: message.messageId, size: message.body.length, tag: message.tag });
      await consumer.ack(message);
    }
  }
  console.log(JSON.stringify({ received }));
  await consumer.shutdown();
}

main(process.argv[2], process.argv[3], process.argv[4]).then(() => process.exit(0), (err) => {
  console.error('FAILED', err);
  process.exit(1);
});
