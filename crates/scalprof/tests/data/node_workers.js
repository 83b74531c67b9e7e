// Worker threads each run a hot JS function; prints ops=N.
const { Worker, isMainThread, parentPort, workerData } = require('worker_threads');
function hotLoop(n) {
  let acc = 0;
  for (let i = 0; i < n; i++) acc = (acc * 31 + i) % 1000003;
  return acc;
}
function work(iters) {
  let ops = 0;
  for (let k = 0; k < iters; k++) { hotLoop(100000); ops++; }
  return ops;
}
if (isMainThread) {
  const n = parseInt(process.argv[2] || '1');
  let done = 0, total = 0;
  for (let i = 0; i < n; i++) {
    const w = new Worker(__filename, { workerData: 2000 });
    w.on('message', (m) => { total += m; if (++done === n) console.log(`ops=${total}`); });
  }
} else {
  parentPort.postMessage(work(workerData));
}
