import fc from "fast-check";
import { shapeArbitrary } from "./harness/generator.ts";
import { expectedOutcome, totalArrivals } from "./harness/oracle.ts";
const samples = fc.sample(shapeArbitrary({ priorities: true, fifo: true, orderedGroups: true, maxArrivals: 400 }), 40);
for (const s of samples) { const e = expectedOutcome(s); const dead = Object.values(e.routes).reduce((a, o) => a + o.deadKeys.length, 0); const sunk = Object.values(e.routes).reduce((a, o) => a + o.sunk.length, 0); console.log(s.routes.length, "routes", totalArrivals(e), "arrivals", dead, "dead", sunk, "sunk", s.routes.map(r => r.steps.map(x => (x.kind === "fan" ? "F" + x.count : x.kind[0])).join("")).join("|")); }
