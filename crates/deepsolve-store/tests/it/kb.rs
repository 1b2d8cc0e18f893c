//! Knowledge bases, documents, chunks and embeddings on every backend under test.

use deepsolve_store::{
    ChunkInsert, EmbeddingSpec, KbDocumentStatus, KbEmbedding, NewKbChunk, NewKbDocument,
    NewKbPage, Store, StoreError,
};

use crate::store::stores;

fn doc(name: &str) -> NewKbDocument {
    NewKbDocument {
        name: name.into(),
        kind: "markdown".into(),
        size: 1234,
        pages: Some(3),
    }
}

fn chunks(n: u32) -> Vec<NewKbChunk> {
    (0..n)
        .map(|i| NewKbChunk {
            ordinal: i,
            page: Some(i / 2 + 1),
            heading_path: vec!["Chapter 1".into(), format!("Section {i}")],
            text: format!("passage number {i}"),
        })
        .collect()
}

async fn generation(store: &Store, kb: &str, user: &str) -> u64 {
    store.kb(kb, user).await.unwrap().unwrap().generation
}

#[tokio::test]
async fn knowledge_bases_are_named_uniquely_per_user_and_deleted_with_their_contents() {
    for (store, _dir) in stores().await {
        let kb = store.create_kb("u1", "Calculus").await.unwrap();
        assert_eq!(kb.generation, 0);
        assert!(matches!(
            store.create_kb("u1", " Calculus ").await,
            Err(StoreError::Conflict(_))
        ));
        // The same name is free for another user.
        store.create_kb("u2", "Calculus").await.unwrap();
        store.create_kb("u1", "Algebra").await.unwrap();
        assert!(matches!(
            store.create_kb("u1", "").await,
            Err(StoreError::Invalid(_))
        ));
        let names: Vec<String> = store
            .list_kbs("u1")
            .await
            .unwrap()
            .into_iter()
            .map(|k| k.name)
            .collect();
        assert_eq!(names, ["Algebra", "Calculus"]);

        let d = store
            .add_kb_document(&kb.id, "u1", doc("notes.md"))
            .await
            .unwrap();
        store
            .insert_kb_chunks(&d.id, "u1", &chunks(3))
            .await
            .unwrap();
        assert!(store.delete_kb(&kb.id, "u1").await.unwrap());
        assert!(store.kb(&kb.id, "u1").await.unwrap().is_none());
        assert!(store.kb_document(&d.id, "u1").await.unwrap().is_none());
        assert!(
            store
                .kb_document_chunks(&d.id, "u1")
                .await
                .unwrap()
                .is_empty()
        );
        assert!(!store.delete_kb(&kb.id, "u1").await.unwrap());
    }
}

#[tokio::test]
async fn documents_move_through_their_statuses_and_every_change_bumps_the_generation() {
    for (store, _dir) in stores().await {
        let kb = store.create_kb("u1", "Physics").await.unwrap();
        let d = store
            .add_kb_document(&kb.id, "u1", doc("ch1.pdf"))
            .await
            .unwrap();
        assert_eq!(d.status, KbDocumentStatus::Queued);
        let g1 = generation(&store, &kb.id, "u1").await;
        assert_eq!(g1, 1);

        store
            .set_kb_document_status(&d.id, "u1", KbDocumentStatus::Ingesting, None)
            .await
            .unwrap();
        store
            .set_kb_document_progress(&d.id, "u1", 2, Some(3))
            .await
            .unwrap();
        let g2 = generation(&store, &kb.id, "u1").await;
        assert_eq!(g2, g1 + 1, "progress is not a change to what is searched");
        let ids = store
            .insert_kb_chunks(&d.id, "u1", &chunks(250))
            .await
            .unwrap();
        assert_eq!(ids.len(), 250);
        assert_eq!(generation(&store, &kb.id, "u1").await, g2 + 1);

        store
            .set_kb_document_status(&d.id, "u1", KbDocumentStatus::Failed, Some("font panic"))
            .await
            .unwrap();
        let failed = store.kb_document(&d.id, "u1").await.unwrap().unwrap();
        assert_eq!(failed.status, KbDocumentStatus::Failed);
        assert_eq!(failed.error.as_deref(), Some("font panic"));
        assert_eq!((failed.pages_done, failed.pages_total), (2, Some(3)));
        // A retry sheds the old error.
        store
            .set_kb_document_status(&d.id, "u1", KbDocumentStatus::Ready, Some("stale"))
            .await
            .unwrap();
        let ready = store.kb_document(&d.id, "u1").await.unwrap().unwrap();
        assert_eq!(ready.error, None);
        assert_eq!(generation(&store, &kb.id, "u1").await, g2 + 3);

        let stored = store.kb_document_chunks(&d.id, "u1").await.unwrap();
        assert_eq!(stored.len(), 250);
        assert_eq!(stored[7].ordinal, 7);
        assert_eq!(stored[7].page, Some(4));
        assert_eq!(stored[7].heading_path, ["Chapter 1", "Section 7"]);
        assert_eq!(stored[7].document_name, "ch1.pdf");

        assert!(store.delete_kb_document(&d.id, "u1").await.unwrap());
        assert_eq!(generation(&store, &kb.id, "u1").await, g2 + 4);
        assert!(
            store
                .kb_document_chunks(&d.id, "u1")
                .await
                .unwrap()
                .is_empty()
        );
    }
}

#[tokio::test]
async fn only_ready_documents_are_paged_for_the_index_in_insertion_order() {
    for (store, _dir) in stores().await {
        let kb = store.create_kb("u1", "Notes").await.unwrap();
        let ready = store
            .add_kb_document(&kb.id, "u1", doc("a.md"))
            .await
            .unwrap();
        let pending = store
            .add_kb_document(&kb.id, "u1", doc("b.md"))
            .await
            .unwrap();
        let ids = store
            .insert_kb_chunks(&ready.id, "u1", &chunks(5))
            .await
            .unwrap();
        store
            .insert_kb_chunks(&pending.id, "u1", &chunks(4))
            .await
            .unwrap();
        store
            .set_kb_document_status(&ready.id, "u1", KbDocumentStatus::Ready, None)
            .await
            .unwrap();

        let mut seen = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let page = store
                .kb_chunks_page(&kb.id, "u1", after.as_deref(), 2)
                .await
                .unwrap();
            let Some(last) = page.last() else { break };
            after = Some(last.id.clone());
            seen.extend(page.into_iter().map(|c| c.id));
        }
        assert_eq!(
            seen, ids,
            "the ready document's chunks, each once, in order"
        );

        let some = store
            .kb_chunks_by_ids(&kb.id, "u1", &[ids[3].clone(), "kbc_nope".into()])
            .await
            .unwrap();
        assert_eq!(some.len(), 1);
        assert_eq!(some[0].text, "passage number 3");
    }
}

#[tokio::test]
async fn embeddings_need_a_recorded_model_of_their_dimension_and_a_new_model_clears_them() {
    for (store, _dir) in stores().await {
        let kb = store.create_kb("u1", "Vectors").await.unwrap();
        let d = store
            .add_kb_document(&kb.id, "u1", doc("v.md"))
            .await
            .unwrap();
        let ids = store
            .insert_kb_chunks(&d.id, "u1", &chunks(3))
            .await
            .unwrap();
        store
            .set_kb_document_status(&d.id, "u1", KbDocumentStatus::Ready, None)
            .await
            .unwrap();
        let vec_of = |i: usize| KbEmbedding {
            chunk_id: ids[i].clone(),
            vector: vec![i as f32, 0.5, -1.25],
        };
        assert!(matches!(
            store
                .set_kb_chunk_embeddings(&kb.id, "u1", &[vec_of(0)])
                .await,
            Err(StoreError::Invalid(_))
        ));
        let spec = EmbeddingSpec {
            model: "embed-small".into(),
            dimension: 3,
        };
        store
            .set_kb_embedding_model(&kb.id, "u1", Some(&spec))
            .await
            .unwrap();
        assert_eq!(
            store.kb(&kb.id, "u1").await.unwrap().unwrap().embedding,
            Some(spec.clone())
        );
        let wrong = KbEmbedding {
            chunk_id: ids[1].clone(),
            vector: vec![1.0, 2.0],
        };
        assert!(matches!(
            store.set_kb_chunk_embeddings(&kb.id, "u1", &[wrong]).await,
            Err(StoreError::Invalid(_))
        ));
        let before = generation(&store, &kb.id, "u1").await;
        store
            .set_kb_chunk_embeddings(&kb.id, "u1", &[vec_of(0), vec_of(2)])
            .await
            .unwrap();
        assert_eq!(generation(&store, &kb.id, "u1").await, before + 1);
        let stored = store
            .kb_embeddings_page(&kb.id, "u1", None, 10)
            .await
            .unwrap();
        assert_eq!(stored, vec![vec_of(0), vec_of(2)]);
        let missing = store
            .kb_chunks_missing_embedding(&kb.id, "u1", 10)
            .await
            .unwrap();
        assert_eq!(missing.len(), 1);
        assert_eq!(missing[0].id, ids[1]);

        // The same model again keeps the vectors; another one clears them.
        store
            .set_kb_embedding_model(&kb.id, "u1", Some(&spec))
            .await
            .unwrap();
        assert_eq!(
            store
                .kb_embeddings_page(&kb.id, "u1", None, 10)
                .await
                .unwrap()
                .len(),
            2
        );
        let other = EmbeddingSpec {
            model: "embed-large".into(),
            dimension: 3,
        };
        store
            .set_kb_embedding_model(&kb.id, "u1", Some(&other))
            .await
            .unwrap();
        assert!(
            store
                .kb_embeddings_page(&kb.id, "u1", None, 10)
                .await
                .unwrap()
                .is_empty()
        );
    }
}

#[tokio::test]
async fn another_users_knowledge_base_reads_and_writes_as_missing() {
    for (store, _dir) in stores().await {
        let kb = store.create_kb("owner", "Private").await.unwrap();
        let d = store
            .add_kb_document(&kb.id, "owner", doc("p.md"))
            .await
            .unwrap();
        let ids = store
            .insert_kb_chunks(&d.id, "owner", &chunks(2))
            .await
            .unwrap();
        store
            .set_kb_document_status(&d.id, "owner", KbDocumentStatus::Ready, None)
            .await
            .unwrap();
        let spec = EmbeddingSpec {
            model: "m".into(),
            dimension: 1,
        };

        assert!(store.kb(&kb.id, "intruder").await.unwrap().is_none());
        assert!(store.list_kbs("intruder").await.unwrap().is_empty());
        assert!(
            store
                .kb_documents(&kb.id, "intruder")
                .await
                .unwrap()
                .is_empty()
        );
        assert!(
            store
                .kb_document(&d.id, "intruder")
                .await
                .unwrap()
                .is_none()
        );
        assert!(
            store
                .kb_document_chunks(&d.id, "intruder")
                .await
                .unwrap()
                .is_empty()
        );
        assert!(
            store
                .kb_chunks_page(&kb.id, "intruder", None, 10)
                .await
                .unwrap()
                .is_empty()
        );
        assert!(
            store
                .kb_chunks_by_ids(&kb.id, "intruder", &ids)
                .await
                .unwrap()
                .is_empty()
        );
        assert!(
            store
                .kb_embeddings_page(&kb.id, "intruder", None, 10)
                .await
                .unwrap()
                .is_empty()
        );
        let not_found = |r: Result<_, StoreError>| matches!(r, Err(StoreError::NotFound(_)));
        assert!(not_found(
            store
                .add_kb_document(&kb.id, "intruder", doc("x.md"))
                .await
                .map(|_| ())
        ));
        assert!(not_found(
            store
                .insert_kb_chunks(&d.id, "intruder", &chunks(1))
                .await
                .map(|_| ())
        ));
        assert!(not_found(
            store
                .set_kb_document_status(&d.id, "intruder", KbDocumentStatus::Failed, Some("x"))
                .await
        ));
        assert!(not_found(
            store
                .set_kb_document_progress(&d.id, "intruder", 1, None)
                .await
        ));
        assert!(not_found(
            store
                .set_kb_embedding_model(&kb.id, "intruder", Some(&spec))
                .await
        ));
        assert!(not_found(
            store.set_kb_chunk_embeddings(&kb.id, "intruder", &[]).await
        ));
        assert!(!store.delete_kb_document(&d.id, "intruder").await.unwrap());
        assert!(!store.delete_kb(&kb.id, "intruder").await.unwrap());

        // Nothing of the owner's changed.
        let kept = store.kb(&kb.id, "owner").await.unwrap().unwrap();
        assert_eq!(kept.generation, 3);
        assert_eq!(kept.embedding, None);
        assert_eq!(
            store
                .kb_document_chunks(&d.id, "owner")
                .await
                .unwrap()
                .len(),
            2
        );
    }
}

#[tokio::test]
async fn pages_hold_the_whole_text_and_are_read_by_character_window() {
    for (store, _dir) in stores().await {
        let kb = store.create_kb("u1", "Notes").await.unwrap();
        let d = store
            .add_kb_document(&kb.id, "u1", doc("notes.pdf"))
            .await
            .unwrap();
        let pages = [
            NewKbPage {
                page: Some(1),
                text: "première page\n\n".into(),
            },
            NewKbPage {
                page: Some(2),
                text: "第二页的文字\n\n".into(),
            },
            NewKbPage {
                page: Some(3),
                text: "third".into(),
            },
        ];
        let total = store.set_kb_pages(&d.id, "u1", &pages).await.unwrap();
        // Characters, not bytes: 15 + 8 + 5.
        assert_eq!(total, 28);
        assert_eq!(store.kb_text_chars(&d.id, "u1").await.unwrap(), 28);
        let window = store.kb_pages_between(&d.id, "u1", 14, 16).await.unwrap();
        let starts: Vec<(Option<u32>, u64)> =
            window.iter().map(|p| (p.page, p.start_char)).collect();
        assert_eq!(starts, [(Some(1), 0), (Some(2), 15)]);
        let last = store.kb_pages_between(&d.id, "u1", 23, 100).await.unwrap();
        assert_eq!(last.len(), 1);
        assert_eq!(last[0].text, "third");
        // Another user sees nothing; replacing the pages replaces them all.
        assert!(
            store
                .kb_pages_between(&d.id, "u2", 0, 100)
                .await
                .unwrap()
                .is_empty()
        );
        assert_eq!(store.kb_text_chars(&d.id, "u2").await.unwrap(), 0);
        assert!(matches!(
            store.set_kb_pages(&d.id, "u2", &pages).await,
            Err(StoreError::NotFound(_))
        ));
        store.set_kb_pages(&d.id, "u1", &pages[2..]).await.unwrap();
        assert_eq!(store.kb_text_chars(&d.id, "u1").await.unwrap(), 5);
        // Clearing drops chunks and pages but keeps the document.
        store
            .insert_kb_chunks(&d.id, "u1", &chunks(4))
            .await
            .unwrap();
        assert_eq!(store.kb_chunk_count(&kb.id, "u1").await.unwrap(), 4);
        assert_eq!(store.kb_chunk_count(&kb.id, "u2").await.unwrap(), 0);
        let before = generation(&store, &kb.id, "u1").await;
        store.clear_kb_document_content(&d.id, "u1").await.unwrap();
        assert!(generation(&store, &kb.id, "u1").await > before);
        assert_eq!(store.kb_chunk_count(&kb.id, "u1").await.unwrap(), 0);
        assert_eq!(store.kb_text_chars(&d.id, "u1").await.unwrap(), 0);
        assert!(store.kb_document(&d.id, "u1").await.unwrap().is_some());
        // Deleting the document (and the KB) takes its pages with it.
        store.set_kb_pages(&d.id, "u1", &pages).await.unwrap();
        assert!(store.delete_kb_document(&d.id, "u1").await.unwrap());
        assert_eq!(store.kb_text_chars(&d.id, "u1").await.unwrap(), 0);
    }
}

#[tokio::test]
async fn extraction_results_are_recorded_and_unfinished_documents_can_be_failed() {
    for (store, _dir) in stores().await {
        let kb = store.create_kb("u1", "Notes").await.unwrap();
        let a = store.add_kb_document(&kb.id, "u1", doc("a")).await.unwrap();
        let b = store
            .add_kb_document(&kb.id, "u1", doc("b.md"))
            .await
            .unwrap();
        let c = store
            .add_kb_document(&kb.id, "u1", doc("c.md"))
            .await
            .unwrap();
        store
            .set_kb_document_extracted(&a.id, "u1", "pdf", Some(12))
            .await
            .unwrap();
        assert!(matches!(
            store
                .set_kb_document_extracted(&a.id, "u2", "pdf", None)
                .await,
            Err(StoreError::NotFound(_))
        ));
        let a = store.kb_document(&a.id, "u1").await.unwrap().unwrap();
        assert_eq!(
            (a.kind.as_str(), a.pages, a.pages_total),
            ("pdf", Some(12), Some(12))
        );
        store
            .set_kb_document_status(&b.id, "u1", KbDocumentStatus::Ingesting, None)
            .await
            .unwrap();
        store
            .set_kb_document_status(&c.id, "u1", KbDocumentStatus::Ready, None)
            .await
            .unwrap();
        // A progress write touches the document: one set far back comes forward.
        store
            .set_kb_document_updated_at(&b.id, "u1", 0)
            .await
            .unwrap();
        store
            .set_kb_document_progress(&b.id, "u1", 1, Some(3))
            .await
            .unwrap();
        let ten_minutes = 10 * 60 * 1000;
        let stale_before = now_ms() - ten_minutes;
        let touched = store.kb_document(&b.id, "u1").await.unwrap().unwrap();
        assert!(touched.updated_at >= stale_before, "{touched:?}");

        // Two whose ingest stopped long ago (one queued, one ingesting), and a ready one as old.
        let d = store
            .add_kb_document(&kb.id, "u1", doc("d.md"))
            .await
            .unwrap();
        let e = store
            .add_kb_document(&kb.id, "u1", doc("e.md"))
            .await
            .unwrap();
        store
            .set_kb_document_status(&d.id, "u1", KbDocumentStatus::Ingesting, None)
            .await
            .unwrap();
        for id in [&d.id, &e.id, &c.id] {
            store
                .set_kb_document_updated_at(id, "u1", stale_before - 1)
                .await
                .unwrap();
        }
        let before = generation(&store, &kb.id, "u1").await;
        let marked = store
            .fail_stale_kb_documents_unscoped(
                "interrupted by a restart: upload it again",
                stale_before,
            )
            .await
            .unwrap();
        assert_eq!(marked, 2);
        assert!(generation(&store, &kb.id, "u1").await > before);
        for (id, status) in [
            (&a.id, KbDocumentStatus::Queued),
            (&b.id, KbDocumentStatus::Ingesting),
            (&c.id, KbDocumentStatus::Ready),
            (&d.id, KbDocumentStatus::Failed),
            (&e.id, KbDocumentStatus::Failed),
        ] {
            let doc = store.kb_document(id, "u1").await.unwrap().unwrap();
            assert_eq!(doc.status, status, "{doc:?}");
        }
        let d = store.kb_document(&d.id, "u1").await.unwrap().unwrap();
        assert_eq!(
            d.error.as_deref(),
            Some("d.md: interrupted by a restart: upload it again")
        );
        // A limit in the future takes the two live ones, not the failed ones again.
        assert_eq!(
            store
                .fail_stale_kb_documents_unscoped("again", now_ms() + ten_minutes)
                .await
                .unwrap(),
            2
        );
    }
}

fn now_ms() -> i64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    i64::try_from(since.as_millis()).unwrap()
}

#[tokio::test]
async fn a_turns_attachments_knowledge_base_is_one_per_turn_and_hidden_from_the_list() {
    for (store, _dir) in stores().await {
        store.create_kb("u1", "Calculus").await.unwrap();
        let first = store.turn_attachments_kb("u1", "turn_a").await.unwrap();
        assert_eq!(first.turn_id.as_deref(), Some("turn_a"));
        let again = store.turn_attachments_kb("u1", "turn_a").await.unwrap();
        assert_eq!(again.id, first.id);
        let other = store.turn_attachments_kb("u1", "turn_b").await.unwrap();
        assert_ne!(other.id, first.id);
        // Another user's turn of the same id gets its own.
        let theirs = store.turn_attachments_kb("u2", "turn_a").await.unwrap();
        assert_ne!(theirs.id, first.id);
        let listed: Vec<String> = store
            .list_kbs("u1")
            .await
            .unwrap()
            .into_iter()
            .map(|k| k.name)
            .collect();
        assert_eq!(listed, ["Calculus"]);
        // It is still a KB of its user by id.
        let read = store.kb(&first.id, "u1").await.unwrap().unwrap();
        assert_eq!(read.turn_id.as_deref(), Some("turn_a"));
        assert!(store.kb(&first.id, "u2").await.unwrap().is_none());
        assert!(store.list_kbs("u1").await.unwrap()[0].turn_id.is_none());
    }
}

#[tokio::test]
async fn chunks_within_a_limit_are_all_inserted_or_none() {
    for (store, _dir) in stores().await {
        let kb = store.create_kb("u1", "Notes").await.unwrap();
        let a = store
            .add_kb_document(&kb.id, "u1", doc("a.md"))
            .await
            .unwrap();
        let b = store
            .add_kb_document(&kb.id, "u1", doc("b.md"))
            .await
            .unwrap();
        let done = store
            .insert_kb_chunks_within(&a.id, "u1", &chunks(3), 5)
            .await
            .unwrap();
        assert!(
            matches!(&done, ChunkInsert::Inserted(ids) if ids.len() == 3),
            "{done:?}"
        );
        let before = generation(&store, &kb.id, "u1").await;
        let over = store
            .insert_kb_chunks_within(&b.id, "u1", &chunks(3), 5)
            .await
            .unwrap();
        assert_eq!(over, ChunkInsert::OverLimit { existing: 3 });
        assert_eq!(store.kb_chunk_count(&kb.id, "u1").await.unwrap(), 3);
        assert_eq!(
            generation(&store, &kb.id, "u1").await,
            before,
            "nothing changed"
        );
        let fits = store
            .insert_kb_chunks_within(&b.id, "u1", &chunks(2), 5)
            .await
            .unwrap();
        assert!(matches!(fits, ChunkInsert::Inserted(_)));
        assert!(matches!(
            store
                .insert_kb_chunks_within(&b.id, "u2", &chunks(1), 100)
                .await,
            Err(StoreError::NotFound(_))
        ));
    }
}
