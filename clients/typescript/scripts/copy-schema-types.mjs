// tsc emits no declarations for a .d.ts source: the generated types go into dist/ beside
// the declarations that import them.
import { copyFile } from "node:fs/promises";

await copyFile("src/schema.d.ts", "dist/schema.d.ts");
