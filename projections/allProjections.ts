import { accountUsageDailyProjection } from "./accountUsageDaily/accountUsageDailyProjection.ts";
import { keyUsageDailyProjection } from "./keyUsageDaily/keyUsageDailyProjection.ts";
import type { Projection } from "./projection.ts";

/** Every projection the projector runs and `npm run replay` rebuilds. */
export const allProjections: Projection[] = [keyUsageDailyProjection, accountUsageDailyProjection];
