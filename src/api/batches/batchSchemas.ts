import { z } from "zod";
import { storableString } from "../http/storableText.ts";
import { MetadataSchema } from "../inference/endpoints/shared/metadataSchema.ts";
import { BATCH_ENDPOINTS } from "./batchObject.ts";

/** POST /v1/batches. */
export const CreateBatchSchema = z
  .object({
    input_file_id: z.string().min(1).max(128),
    endpoint: z.enum(BATCH_ENDPOINTS),
    completion_window: z.literal("24h"),
    metadata: MetadataSchema,
    output_expires_after: z
      .object({
        anchor: z.literal("created_at"),
        seconds: z.number().int().min(3600, "must be at least 3600 (1 hour)").max(2_592_000, "must be at most 2592000 (30 days)"),
      })
      .strict()
      .nullish(),
  })
  .strict();
export type CreateBatch = z.infer<typeof CreateBatchSchema>;

/** GET /v1/batches: newest first, `after` a batch id of the previous page. */
export const ListBatchesQuerySchema = z
  .object({
    after: storableString().min(1).max(128).optional(),
    limit: z.coerce.number().int().min(1).max(100).default(20),
  })
  .strict();

/** One line of a batch's input file (its `body` is checked by the endpoint's own request schema). */
export const BatchInputLineSchema = z
  .object({
    custom_id: z.string().min(1).max(512),
    method: z.literal("POST"),
    url: z.string().max(256),
    body: z.record(z.string(), z.unknown()),
  })
  .strict();
