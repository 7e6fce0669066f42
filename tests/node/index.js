// The Node AMQP clients pinned by package-lock.json, for every Node program of the tests
// (tests/interop/node, tests/amqp_messaging_amqplib). Those programs live outside this folder,
// so a bare require('amqplib') there would not find this node_modules: they require this file,
// which resolves each client from here.
'use strict';

const path = require('node:path');

// `file`: a file inside the package that its `exports` map does not publish.
function load(name, file) {
  try {
    return require(file ? path.join(path.dirname(require.resolve(name)), file) : name);
  } catch (err) {
    if (err.code === 'MODULE_NOT_FOUND') {
      err.message = `${err.message}\n(${name} is installed by scripts/install-deps: npm ci in ${__dirname})`;
    }
    throw err;
  }
}

// The release of package `name` that require() loads here: its package.json, found by walking up
// from its entry point, because `exports` maps may not publish package.json itself.
function versionOf(name) {
  const fs = require('node:fs');
  for (let dir = path.dirname(require.resolve(name)); dir !== path.dirname(dir); dir = path.dirname(dir)) {
    const manifest = path.join(dir, 'package.json');
    if (fs.existsSync(manifest)) {
      const pkg = JSON.parse(fs.readFileSync(manifest, 'utf8'));
      if (pkg.name === name) return pkg.version;
    }
  }
  throw new Error(`no package.json of ${name} above ${require.resolve(name)}`);
}

module.exports = {
  versionOf,
  get amqplib() { return load('amqplib'); },
  get amqplibCallback() { return load('amqplib/callback_api'); },
  get rabbitmqClient() { return load('rabbitmq-client'); },
  // amqplib's protocol definitions (method ids), for the one method its API deliberately never
  // sends as a client may (basic.qos with a prefetch-size): the refusal tests need it.
  get amqplibDefs() { return load('amqplib', path.join('lib', 'defs.js')); },
};
