// Builds the console's browser bundles into ../static/kindgi/dist/ (committed, so that
// neither running nor testing the console needs Node). `node build.mjs --watch` rebuilds on change.
import * as esbuild from "esbuild";
import { fileURLToPath } from "node:url";
import path from "node:path";

const here = path.dirname(fileURLToPath(import.meta.url));
const outdir = path.resolve(here, "../static/kindgi/dist");

const options = {
  entryPoints: {
    authoring: path.join(here, "src/authoring/index.jsx"),
    charts: path.join(here, "src/charts/index.js"),
    console: path.join(here, "src/console/index.js"),
    runform: path.join(here, "src/runform/index.js"),
  },
  outdir,
  bundle: true,
  minify: true,
  format: "iife",
  target: ["es2020", "chrome100", "firefox100", "safari15"],
  jsx: "automatic",
  legalComments: "linked",
  sourcemap: false,
  define: { "process.env.NODE_ENV": '"production"' },
  logLevel: "info",
  metafile: true,
};

if (process.argv.includes("--watch")) {
  const context = await esbuild.context(options);
  await context.watch();
} else {
  const result = await esbuild.build(options);
  const sizes = Object.entries(result.metafile.outputs).map(([file, { bytes }]) => `${path.basename(file)} ${(bytes / 1024).toFixed(1)} KiB`);
  console.log(sizes.join("\n"));
}
