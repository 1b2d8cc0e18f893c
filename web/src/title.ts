import { useEffect } from "preact/hooks";

/** The document title: the page's name, then the product's. */
export function useTitle(page: string | null): void {
  useEffect(() => {
    document.title = page ? `${page} · deepsolve` : "deepsolve";
  }, [page]);
}
