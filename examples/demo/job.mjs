// The small script the demo runs under `tenure run`: it works (prints a line) every 300 ms with
// the fence tenure gave it, and stops cleanly on SIGTERM.
import { clearInterval, setInterval } from 'node:timers';

const fence = process.env.TENURE_FENCE;
let tick = 0;
console.log(`job ${process.pid} started as ${process.env.TENURE_ID} with TENURE_FENCE=${fence}`);
const timer = setInterval(() => console.log(`job ${process.pid}: tick ${++tick} (fence ${fence})`), 300);
process.on('SIGTERM', () => {
  clearInterval(timer);
  console.log(`job ${process.pid}: SIGTERM, stopping`);
  process.exit(0);
});
