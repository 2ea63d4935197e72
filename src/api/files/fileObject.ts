import type { StoredFile } from "./fileStore.ts";

/** OpenAI's file object (`object: "file"`). */
export type FileObject = {
  id: string;
  object: "file";
  bytes: number;
  created_at: number;
  filename: string;
  purpose: string;
  status: "processed";
  expires_at: number | null;
  status_details: null;
};

const seconds = (date: Date) => Math.floor(date.getTime() / 1000);

export function toFileObject(file: StoredFile): FileObject {
  return {
    id: file.id,
    object: "file",
    bytes: file.bytes,
    created_at: seconds(file.createdAt),
    filename: file.filename,
    purpose: file.purpose,
    status: "processed",
    expires_at: file.expiresAt ? seconds(file.expiresAt) : null,
    status_details: null,
  };
}
