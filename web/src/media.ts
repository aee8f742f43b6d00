// useMedia(path): the URL to show a server file from (the path itself, or a blob when a key is needed).
import { useEffect, useState } from "react";
import { apiKey, mediaUrl } from "./api";

export function useMedia(path: string | null | undefined): string | null {
  const direct = path && !apiKey.get() ? path : null;
  const [url, setUrl] = useState<string | null>(direct);
  useEffect(() => {
    if (!path) return setUrl(null);
    if (!apiKey.get()) return setUrl(path);
    let live = true;
    mediaUrl(path).then((u) => live && setUrl(u), () => live && setUrl(null));
    return () => { live = false; };
  }, [path]);
  return direct ?? url;
}
