'use strict';
// The embedded object store: s3rver on 127.0.0.1, persisted under a directory, with two changes made here
// rather than in a fork (see docs/decisions/0032-tiered-storage.md):
//  * one access key, from the environment, replaces s3rver's well-known "S3RVER" key. s3rver does not verify
//    SigV4 signatures, so the key id itself is the secret; it is random per data directory and kept 0600.
//  * putObject is durable and atomic: the bytes and the metadata go to temporary files that are fsynced and
//    renamed, the object file last, so a kill never leaves a torn or half-described object, and the answer is
//    sent only once the object is on disk (s3rver answers before its write stream has finished).
// Usage: SLUICE_OBJECT_STORE_KEY=... node serve.cjs <directory> <port> <bucket>
const crypto = require('crypto');
const fs = require('fs-extra');
const path = require('path');
const { pipeline, Transform } = require('stream');
const S3rver = require('s3rver');
const S3Object = require('s3rver/lib/models/object');
const AWSAccount = require('s3rver/lib/models/account');
const FilesystemStore = require('s3rver/lib/stores/filesystem');

const [directory, port, bucket] = process.argv.slice(2);
const key = process.env.SLUICE_OBJECT_STORE_KEY;
if (!directory || !port || !bucket || !key) {
  console.error('usage: SLUICE_OBJECT_STORE_KEY=... node serve.cjs <directory> <port> <bucket>');
  process.exit(2);
}
AWSAccount.DUMMY_ACCOUNT.revokeAccessKey('S3RVER');
AWSAccount.DUMMY_ACCOUNT.createKeyPair(key, key);

async function durableWrite(target, write) {
  const tmp = `${target}.tmp-${crypto.randomBytes(6).toString('hex')}`;
  try {
    const result = await write(tmp);
    const fd = await fs.open(tmp, 'r');
    try { await fs.fsync(fd); } finally { await fs.close(fd); }
    await fs.rename(tmp, target);
    return result;
  } catch (err) {
    await fs.remove(tmp).catch(() => {});
    throw err;
  }
}

async function fsyncDir(dir) {
  const fd = await fs.open(dir, 'r');
  try { await fs.fsync(fd); } finally { await fs.close(fd); }
}

FilesystemStore.prototype.putObject = async function putObject(object) {
  const objectPath = this.getResourcePath(object.bucket, object.key, 'object');
  await fs.mkdirp(path.dirname(objectPath));
  const md5Context = crypto.createHash('md5');
  let size = 0;
  const tmp = `${objectPath}.tmp-${crypto.randomBytes(6).toString('hex')}`;
  try {
    if (Buffer.isBuffer(object.content)) {
      md5Context.update(object.content);
      size = object.content.length;
      await fs.writeFile(tmp, object.content);
    } else {
      await new Promise((resolve, reject) => {
        pipeline(object.content, new Transform({
          transform(chunk, encoding, callback) {
            md5Context.update(chunk, encoding);
            size += chunk.length;
            callback(null, chunk);
          },
        }), fs.createWriteStream(tmp), (err) => (err ? reject(err) : resolve()));
      });
    }
    const fd = await fs.open(tmp, 'r');
    try { await fs.fsync(fd); } finally { await fs.close(fd); }
    const md5 = md5Context.digest('hex');
    const metadata = Object.fromEntries(Object.entries(object.metadata).filter(
      ([name]) => S3Object.ALLOWED_METADATA.includes(name) || name.startsWith('x-amz-meta-')));
    await durableWrite(this.getResourcePath(object.bucket, object.key, 'object.md5'),
      (file) => fs.writeFile(file, md5));
    await durableWrite(this.getResourcePath(object.bucket, object.key, 'metadata.json'),
      (file) => fs.writeFile(file, JSON.stringify(metadata, null, 2)));
    await fs.rename(tmp, objectPath);
    await fsyncDir(path.dirname(objectPath));
    return { size, md5 };
  } catch (err) {
    await fs.remove(tmp).catch(() => {});
    throw err;
  }
};

const server = new S3rver({
  address: '127.0.0.1',
  port: Number(port),
  directory,
  silent: true,
  vhostBuckets: false,
  configureBuckets: [{ name: bucket }],
});
server.run().then((address) => {
  process.stdout.write(`ready ${address.port}\n`);
}, (err) => {
  console.error(`object store failed to start: ${err.message}`);
  process.exit(1);
});
for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => server.close(() => process.exit(0)));
}
