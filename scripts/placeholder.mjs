// A script that a later issue fills in. It says so and fails, so nothing pretends to work.
const [, , name, issue] = process.argv;
console.error(`tenure: 'npm run ${name}' is not built yet; it lands with ${issue}.`);
process.exit(2);
